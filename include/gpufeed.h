/*
 * gpufeed — keeps GPUs fed during training.
 *
 * A loader turns a data set (an ImageFolder tree, a list file or
 * WebDataset-style tar shards) into a stream of fixed-shape uint8 batches
 * (N x H x W x C), read and decoded on a pool of threads into D batch
 * slots ahead of the trainer (prefetch_depth; plus one per batch the
 * trainer holds).
 *
 *   gf_settings s;
 *   gf_default_settings(&s);
 *   s.data = "train/";
 *   s.device = GF_DEVICE_CPU;   // host pixels; AUTO: device batches on a GPU
 *   gf_loader *l;
 *   if (gf_open(&l, &s) < 0) ...                  // message: gf_last_error(l)
 *   for (gf_batch *b; gf_next(l, &b) == 0; gf_release(l, b))
 *       train_step(b->pixels, b->labels, b->count);
 *   gf_close(&l);
 *
 * Every function returns 0 (or a non-negative count) on success and a
 * negative GF_E* code on failure; gf_strerror() and gf_err_name() name it.
 * The library never prints, exits or aborts; all threads it starts are
 * joined, and everything it allocates freed, by gf_close(). Memory it
 * hands over (gf_read_sample) is freed with gf_free().
 *
 * Threads. A loader's calls come in three groups:
 * - The consumer's: gf_next, gf_next_timed, gf_release,
 *   gf_release_stream. Calls of gf_next and gf_next_timed must not overlap
 *   one another (one consumer thread at a time); a held batch may be
 *   released from any thread, also while gf_next blocks in another, but
 *   each batch once. A consumer that must stay responsive (to signals, to
 *   a stop request) calls gf_next_timed in slices instead of blocking in
 *   gf_next: a GF_EAGAIN takes nothing, so the next call goes on exactly.
 * - The lifecycle's: gf_open, gf_open_samples, gf_seek, gf_set_state,
 *   gf_set_order, gf_close. They stop and restart the loader's threads: no
 *   consumer's or other lifecycle call may overlap them, and gf_open,
 *   gf_open_samples and gf_close need the loader wholly to themselves.
 *   Batches held across gf_seek / gf_set_state / gf_set_order stay valid
 *   until released.
 * - The observers': gf_get_stats, gf_get_state, gf_last_error,
 *   gf_sample_path, gf_sample_label, gf_read_sample. From any thread, any
 *   number at once, also while gf_next blocks and while gf_seek or
 *   gf_set_state runs (they see the loader before or after the seek).
 * gf_batch_wait: any thread, on a batch still held (it reaches the batch's
 * loader on CUDA, so not while that loader is being closed).
 * gf_version, gf_strerror, gf_err_name, gf_sample_error_kind,
 * gf_dtype_size, gf_default_settings, gf_setting_*, gf_settings_set/get
 * (on the caller's struct), gf_probe, gf_free and gf_decode_image touch no
 * loader: any thread. A gf_decoder is one thread's at a time.
 * settings.on_sample_error and on_sample_warning run on the loader's
 * controller thread (see gf_sample_error_fn for what they may call).
 */
#ifndef GPUFEED_H
#define GPUFEED_H

#include <stddef.h>
#include <stdint.h>

/* GF_VERSION_MAJOR, _MINOR, _PATCH, GF_VERSION ("0.3.0") and
 * GF_VERSION_HEX (0x000300): generated from meson.build's project version. */
#include "gpufeed_version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define GF_API
#else
#define GF_API __attribute__((visibility("default")))
#endif

/* One table, so a code and its texts cannot drift apart: it makes the
 * gf_errno constants, gf_strerror's and gf_err_name's texts, the sample
 * error kinds and gf_sample_error_kind(). X(name, value, text).
 *
 * Sample errors: what one bad sample fails with (skipped or failed by
 * settings.on_error, counted per kind in stats.errors_by_kind). Their
 * values run down from GF_ENOENT without a gap, so a kind is also
 * GF_ENOENT - code; a new kind goes at the end of this list. */
#define GF_SAMPLE_ERRNO_MAP(X)                                                 \
    X(ENOENT, -4004, "no such file")                                            \
    X(EIO, -4005, "read error")                                                 \
    X(EEMPTY, -4006, "file is empty")                                           \
    X(ETRUNC, -4007, "truncated image data")                                    \
    X(ECORRUPT, -4008, "corrupt image data")                                    \
    X(EFORMAT, -4009, "not an image, or an unsupported format")                 \
    X(ETOOBIG, -4010, "image or file over the configured limit")

#define GF_ERRNO_MAP(X)                                                        \
    X(EOF, -4001, "end of data: every requested epoch was delivered")          \
    X(EINVAL, -4002, "invalid argument")                                        \
    X(ENOMEM, -4003, "out of memory")                                           \
    GF_SAMPLE_ERRNO_MAP(X)                                                      \
    X(EDATASET, -4011, "bad data set: unreadable, empty or malformed")          \
    X(EBUSY, -4012, "batches are still held by the caller")                     \
    X(ENODEV, -4013, "backend not available on this build or machine")         \
    X(ETHREAD, -4014, "could not start a thread")                              \
    X(EAGAIN, -4015, "no batch became ready in time")                          \
    X(EMFILE, -4016, "too few file descriptors")

typedef enum gf_errno {
#define GF_ERRNO_ENUM_(name, value, text) GF_##name = (value),
    GF_ERRNO_MAP(GF_ERRNO_ENUM_)
#undef GF_ERRNO_ENUM_
} gf_errno;

/* A sample error's index in stats.errors_by_kind: GF_KIND_ENOENT = 0, ...;
 * GF_SAMPLE_ERROR_KINDS counts them. */
typedef enum gf_error_kind {
#define GF_SAMPLE_KIND_ENUM_(name, value, text) GF_KIND_##name,
    GF_SAMPLE_ERRNO_MAP(GF_SAMPLE_KIND_ENUM_)
#undef GF_SAMPLE_KIND_ENUM_
    GF_SAMPLE_ERROR_KINDS
} gf_error_kind;

/* errors_by_kind's length: fixed, so that a new kind (up to this many) is
 * not an ABI break; entries from GF_SAMPLE_ERROR_KINDS on stay 0. */
#define GF_SAMPLE_ERROR_KINDS_MAX 8

typedef enum gf_io {
    GF_IO_AUTO = 0,  /* io_uring when the kernel allows it, the decode
                        threads reading what the page cache holds with
                        pread (RWF_NOWAIT) first; else POSIX */
    GF_IO_URING = 1, /* io_uring or GF_ENODEV from gf_open() */
    GF_IO_POSIX = 2, /* pread() on the decode threads */
} gf_io;

typedef enum gf_decoder_kind {
    GF_DECODER_AUTO = 0,  /* each format's own library where built:
                             libjpeg-turbo (JPEG), libspng (PNG), libwebp
                             (WebP); stb_image for the rest */
    GF_DECODER_STB = 1,   /* stb_image for every format it reads (JPEG and
                             PNG too: for comparisons); WebP by libwebp */
    GF_DECODER_TURBO = 2, /* AUTO, but without libjpeg-turbo GF_ENODEV */
} gf_decoder_kind;

typedef enum gf_transform {
    GF_TRANSFORM_TRAIN = 0, /* random-resized-crop + horizontal flip */
    GF_TRANSFORM_EVAL = 1,  /* resize shorter side + center crop */
} gf_transform;

/* How a resize samples its source, as torchvision's InterpolationMode over
 * PIL: antialiased bilinear and bicubic (PIL's filters, support widened by
 * the scale when shrinking), and nearest neighbour. */
typedef enum gf_interpolation {
    GF_INTERP_BILINEAR = 0,
    GF_INTERP_BICUBIC = 1,
    GF_INTERP_NEAREST = 2,
} gf_interpolation;

typedef enum gf_on_error {
    GF_ON_ERROR_SKIP = 0, /* count it, fill the batch with later samples */
    GF_ON_ERROR_FAIL = 1, /* gf_next() returns the sample's error */
} gf_on_error;
/* A tar shard key whose .cls is no label ("-1", "x", over 64 bytes) is
 * skipped under SKIP, counted (shard_keys_skipped) and a warning
 * (on_sample_warning and gf_recent_warnings: sample -1, GF_ECORRUPT, path
 * "shard.tar:key"); under FAIL gf_open fails with GF_EDATASET naming the
 * shard, the key and its .cls member. gf_index_open does the same (its
 * warnings through on_sample_warning alone). */

/* What a damaged tar shard does at gf_open (a shard that is zero bytes,
 * has no member, is not a tar, or whose walk meets a bad header, a member
 * running past the end of the file, or a failed read).
 *   FOLLOW: FAIL under on_error = fail, SKIP under on_error = skip.
 *   FAIL: gf_open fails (GF_EDATASET) naming the first damaged shard in
 *     source order, the offset and the reason.
 *   SKIP: the shard's members wholly before the damage are indexed (as
 *     any shard's are), those from the damaged header on dropped; the
 *     shard is reported: stats.shards_damaged and shard_members_lost,
 *     gf_damaged_shards(), and one on_sample_error call and one
 *     stats.recent entry per shard, from gf_open on its calling thread,
 *     in source order, with sample -1, the shard's path, a code saying
 *     what kind (GF_EEMPTY zero bytes or no member, GF_ETRUNC cut short,
 *     GF_EIO a read failed, GF_ECORRUPT not a valid header) and reason
 *     "offset N: reason; K members kept, L lost" (lost: the members of the
 *     key the damage cut, and the damaged member itself). They are not
 *     sample errors: stats.errors does not count them. The kept set is a
 *     function of the files alone, so every rank and resume agrees, and
 *     gf_index_open under the same settings indexes the same samples. */
typedef enum gf_on_shard_error {
    GF_SHARD_FOLLOW = 0,
    GF_SHARD_FAIL = 1,
    GF_SHARD_SKIP = 2,
} gf_on_shard_error;

/* What a decoder warning does. libjpeg-turbo warns, and goes on with grey
 * or smeared blocks, on damaged entropy data ("Corrupt JPEG data: 3
 * extraneous bytes before marker 0xd9", "bad Huffman code"); it does not
 * stop on a file cut short (gpufeed finds that first, GF_ETRUNC, in every
 * mode).
 *   STRICT: a warning is the sample's error, GF_ECORRUPT (GF_ETRUNC for
 *     "Premature end of JPEG file") with libjpeg's text in the reason:
 *     "corrupt JPEG data: bad Huffman code". A loader's decode is partial
 *     (DCT-scaled, cropped columns, rows above the crop skipped): skipped
 *     rows and columns are still entropy-decoded, so damage in them is
 *     seen, but rows below the last one the crop needs are not read, so
 *     damage there (which cannot change the pixels delivered) is not seen.
 *     A decode that reaches the bottom reads on to EOI (junk there warns).
 *   STRICT_WHOLE: STRICT, and every JPEG is entropy-decoded to its end
 *     (EOI included), whatever the crop: what `gpufeed verify` runs.
 *   LENIENT: what PIL/torchvision accept: the sample decodes as libjpeg
 *     made it, and stats.decode_warnings counts it (gf_recent_warnings and
 *     on_sample_warning name it, with STRICT's code and reason); but
 *     "Premature end of JPEG file" stays GF_ETRUNC, as PIL refuses a
 *     truncated file too.
 * A JPEG of more than 500 scans is GF_ECORRUPT "more than 500 scans (a
 * decompression-time bomb?)" on both decoders; 12-bit, lossless and
 * hierarchical JPEGs, and arithmetic-coded ones on stb_image, GF_EFORMAT.
 * PNG (libspng): STRICT checks every chunk CRC (gpufeed walks them when the
 * crop stops above the last row) and the deflate data down to the crop's
 * last row, and the Adler-32 when that is the image's last row; damage
 * that breaks no CRC below the crop (an encoder bug) is not seen. WHOLE
 * inflates all and checks the Adler-32. LENIENT follows PIL: a bad CRC
 * before the first IDAT fails; a bad IDAT CRC or Adler-32 that the decode
 * meets decodes with a warning; a broken deflate stream or a cut fails.
 * decoder = STB, or no libspng: the same CRC rules, no Adler-32 check.
 * WebP (libwebp) has no warnings: LENIENT is STRICT. A file shorter than
 * its RIFF size is GF_ETRUNC whatever the crop; lossy VP8 has no checksum,
 * so a flipped byte may decode to other pixels. Animated WebP: GF_EFORMAT.
 * GIF, BMP, TGA, PSD, PNM (stb_image, which fills in what a file lacks):
 * gpufeed first checks that the file holds what its header promises. In
 * every mode data that runs out is GF_ETRUNC ("TGA: 768 of 49152 pixel
 * bytes (truncated?)") and header nonsense GF_ECORRUPT ("PNM: maxval 0",
 * "BMP: palette of 2147483648 entries", "GIF: frame 0 is 0x0"); a GIF with
 * no trailer after its last whole frame, a later GIF frame outside the
 * screen, or a BMP palette overlapping the pixels fail STRICT and decode
 * under LENIENT with a warning; bytes after the image (a TGA footer,
 * concatenated PNMs) are allowed. In every mode an entry that is not a
 * regular file is GF_EIO ("not a regular file: a FIFO"), and a TIFF is
 * GF_EFORMAT ("TIFF: not a supported format"). */
typedef enum gf_strictness {
    GF_STRICT = 0,
    GF_LENIENT = 1,
    GF_STRICT_WHOLE = 2,
} gf_strictness;

typedef enum gf_device {
    GF_DEVICE_AUTO = 0, /* CUDA when built and a GPU is present, else CPU; a
                           GPU whose device ring does not fit is an error
                           (GF_ENOMEM), not a fall back to the CPU */
    GF_DEVICE_CUDA = 1, /* CUDA or GF_ENODEV from gf_open() */
    GF_DEVICE_CPU = 2,  /* host memory; the CPU twin of the device kernel */
} gf_device;

/* Element type of batch->data. UINT8 keeps the decoded pixels as they are
 * (NHWC, no normalisation); the others are (x - mean[c]) / std[c]. */
typedef enum gf_dtype {
    GF_DTYPE_UINT8 = 0,
    GF_DTYPE_FLOAT32 = 1,
    GF_DTYPE_FLOAT16 = 2,  /* IEEE binary16, round to nearest even */
    GF_DTYPE_BFLOAT16 = 3, /* round to nearest even */
    /* A field's elements only (gf_field.dtype); never the batch's. */
    GF_DTYPE_INT32 = 4,
    GF_DTYPE_INT64 = 5,
    GF_DTYPE_FLOAT64 = 6,
} gf_dtype;

typedef enum gf_layout {
    GF_LAYOUT_NHWC = 0,
    GF_LAYOUT_NCHW = 1,
} gf_layout;

/* Called for every bad sample, in sampler order, on the loader's
 * controller thread (the one thread that runs the callback: calls never
 * overlap), with no lock held; path and reason are valid during the call.
 * It runs when a batch is finished, not when it is taken: a prefetched
 * batch that gf_seek, gf_set_state or gf_set_order drops has reported its
 * bad samples already, and a sample read again after the seek is reported
 * again (gf_get_stats counts both).
 * It delays the batches behind it, so keep it short. It may call the
 * observers (gf_get_stats: which counts this sample once the callback has
 * returned, gf_get_state, gf_last_error, gf_sample_path, gf_sample_label,
 * gf_read_sample) and anything that touches no loader; not gf_next (which
 * waits for this thread), gf_release*, gf_seek, gf_set_state or gf_close
 * (which join it). */
typedef void (*gf_sample_error_fn)(void *user, int64_t sample, const char *path,
                                   int code, const char *reason);

/* Which files an ImageFolder indexes, by extension (any case).
 * TORCHVISION: torchvision's IMG_EXTENSIONS, .jpg .jpeg .png .ppm .bmp .pgm
 *   .tif .tiff .webp, so that indices and class contents match a PyTorch
 *   run on the same tree (.tif/.tiff are indexed but not decoded: each is
 *   a GF_EFORMAT sample, "TIFF: not a supported format").
 * ALL: also .gif .tga .psd .pnm .pbm (what stb_image decodes).
 * Files left out are counted in stats.folder_skipped. List files and tar
 * shards do not use this: a list names its files, and a shard's image
 * member may have any of the ALL extensions. */
typedef enum gf_extensions {
    GF_EXT_TORCHVISION = 0,
    GF_EXT_ALL = 1,
} gf_extensions;

/* stats.folder_skipped's entries: files left out of an ImageFolder per
 * extension (those of GF_EXT_ALL that TORCHVISION leaves out), every
 * other file (another extension or none), and macOS AppleDouble files
 * named like images ("._x.jpg": metadata, no image; gf_skipped_entry
 * names them; none under folder_walk TORCHVISION, which takes them). Other
 * hidden entries are taken, as torchvision takes them. */
enum {
    GF_SKIPPED_GIF,
    GF_SKIPPED_TGA,
    GF_SKIPPED_PSD,
    GF_SKIPPED_PNM,
    GF_SKIPPED_PBM,
    GF_SKIPPED_OTHER,
    GF_SKIPPED_APPLEDOUBLE,
    GF_SKIPPED_MAX = 8 /* the array's length: fixed, for the ABI */
};

/* How an ImageFolder's classes are walked. Its classes (class_to_idx) are
 * torchvision's either way; so are its samples and labels, hidden files
 * and folders included, but for:
 *   GPUFEED: what would relabel or repeat samples is left out, each such
 *     entry named (gf_skipped_entry) and a warning at open: macOS's
 *     AppleDouble "._x.jpg" (metadata named like an image); a link inside
 *     a class to a directory outside that class folder (the root, another
 *     class, elsewhere: its files would take this class's label); within a
 *     class a directory (device, inode) reached again, through a loop or a
 *     second link (os.walk would list its files again).
 *   TORCHVISION: os.walk(followlinks=True)'s walk, so that samples, labels
 *     and their order are torchvision ImageFolder's: AppleDouble files are
 *     samples (which fail to decode: bad samples, as in torchvision), links
 *     out of a class are walked under the class's label, a directory
 *     reached through a second link is walked again, and a directory named
 *     like an image is no sample. But a link back to a directory on its own
 *     walk's path (a loop: class/up -> ..) is not followed, and is named:
 *     os.walk follows it round until the kernel's ELOOP, which no setting
 *     matches.
 * In both a class folder that is the root or above it (a loop by itself)
 * keeps its label without samples, and is named. */
typedef enum gf_folder_walk {
    GF_FOLDER_WALK_GPUFEED = 0,
    GF_FOLDER_WALK_TORCHVISION = 1,
} gf_folder_walk;

/* ImageFolder walk caps: sub-directory levels below a class folder, and
 * directory entries read in the whole tree (AppleDouble files left out are
 * not counted; under GF_FOLDER_WALK_TORCHVISION a directory walked again
 * counts its entries again). Beyond either, gf_open() fails with
 * GF_EDATASET naming the directory where indexing stopped. Under
 * GF_FOLDER_WALK_GPUFEED each directory (device, inode) is walked once,
 * whatever the links to it: stats.folder_dirs_again counts the others;
 * under TORCHVISION it counts the loops not followed. */
#define GF_FOLDER_MAX_DEPTH 64
#define GF_FOLDER_MAX_ENTRIES (1ull << 27)

/* The order samples are read in, each epoch (`shuffle` decides whether
 * either order is shuffled; unshuffled both are the index order).
 *   GLOBAL: one permutation of every sample; rank r of world takes
 *     positions r, r + world, ... (torch's DistributedSampler).
 *   SHARDS: for tar shards (WebDataset), so a shard is read in one stretch
 *     rather than one request per sample: each epoch the shards are
 *     permuted, cut into windows of shard_window consecutive shards, and
 *     the samples of each window permuted among themselves. Rank r takes
 *     the CONTIGUOUS positions [r*L, (r+1)*L) of the epoch (L = its share),
 *     so each rank streams about 1/world of the shards: unlike
 *     DistributedSampler's interleaving, which GLOBAL keeps. On a data set
 *     that is not tar shards gf_open returns GF_EINVAL.
 *   AUTO: SHARDS when data is remote (http://, https://, s3://), else
 *     GLOBAL. */
typedef enum gf_order {
    GF_ORDER_AUTO = 0,
    GF_ORDER_GLOBAL = 1,
    GF_ORDER_SHARDS = 2,
} gf_order;

/* data sets mixed by weight (settings.data "mix:W=SOURCE|W=SOURCE..."):
 * position q of an epoch draws source s with probability weight_s / sum
 * (a low-discrepancy schedule of (seed, epoch, q): each block of 256
 * positions draws every source its units' share to within one, shuffled
 * within the block; unshuffled, every prefix is within a few samples),
 * and source s's k-th draw is its own k-th
 * position, in the order it gives alone on one rank (its own shuffle and
 * shard windows, keyed by the same seed). An epoch is that one sequence
 * on every world; ranks split it as a lone data set's epoch (interleaved,
 * or in contiguous spans under order SHARDS: a rank reads a run of each
 * source's order), padding or drop_last alike, so gf_set_state's elastic
 * resume is a mix's too.
 *   CYCLE: an epoch is as many positions as the sources' sizes summed,
 *     and each source cycles its own epochs (a source
 *     drawn more than its size starts its next epoch; its samples' crops
 *     are keyed by its own epoch, so a repeat is a new view).
 *   FIRST: epoch E is every source's own epoch E, and it ends with the
 *     draw that takes the last sample of the first source exhausted. */
typedef enum gf_mix_epoch {
    GF_MIX_EPOCH_CYCLE = 0,
    GF_MIX_EPOCH_FIRST = 1,
} gf_mix_epoch;

/* A mix's labels: OFFSET, each source's labels after the previous
 * sources' classes (source s's label l is l + the classes of sources
 * before it; class names joined when every source has them); SOURCE,
 * each source's own, with gf_batch.sources saying whose. */
typedef enum gf_mix_labels {
    GF_MIX_LABELS_OFFSET = 0,
    GF_MIX_LABELS_SOURCE = 1,
} gf_mix_labels;

typedef struct gf_settings {
    const char *data;      /* ImageFolder directory, list file, or tar shards
                              ("dir/train-{000000..000127}.tar", "a.tar,b.tar");
                              or a mix of them by weight, "mix:" then
                              WEIGHT=SOURCE for each, '|' between
                              ("mix:0.7=train|0.3=extra-{000..015}.tar":
                              gf_mix_epoch); required */
    uint64_t seed;         /* 0 */
    uint64_t epochs;       /* epochs to deliver, 0 = unbounded; default 1 */
    int batch_size;        /* 64 */
    int height, width;     /* output size, 224 x 224 */
    int channels;          /* 3 (RGB); 1 = gray, 4 = RGBA */
    int threads;           /* decode threads; 0 = cores - 1, at least 1 */
    int prefetch_depth;    /* batch slots prefetched into, besides those of
                              held batches; 0 = 4 */
    int queue_depth;       /* io_uring reads in flight; 0 = 64 */
    gf_io io;              /* GF_IO_AUTO */
    gf_decoder_kind decoder; /* GF_DECODER_AUTO */
    gf_transform transform;/* GF_TRANSFORM_TRAIN */
    gf_on_error on_error;  /* GF_ON_ERROR_SKIP */
    int shuffle;           /* 1 */
    int drop_last;         /* 0: a final short batch; 1: drop it and the
                              rank padding (shares become floor(n/world));
                              a share under one batch is GF_EINVAL */
    int rank, world;       /* this process reads share `rank` of `world`.
                              world 0 (default): from the launcher's
                              environment (RANK/WORLD_SIZE of torchrun,
                              OMPI_COMM_WORLD_RANK/SIZE of mpirun,
                              SLURM_PROCID/NTASKS), else rank 0 of 1. A
                              launcher's value that is not a whole number,
                              or a rank without its world size, is
                              GF_EINVAL naming the variable */
    uint64_t max_pixels;   /* 64 Mi pixels (0 = that): checked from the
                              header before any pixel buffer is allocated */
    uint64_t max_file_bytes; /* 256 MiB (0 = that) */
    float scale_min, scale_max; /* 0.08, 1.0: random-resized-crop area */
    float ratio_min, ratio_max; /* 3/4, 4/3: random-resized-crop aspect */
    float flip_prob;       /* 0.5 (train only) */
    float crop_fraction;   /* 0.875: eval resizes the shorter side to
                              size / crop_fraction, then center-crops */
    gf_sample_error_fn on_sample_error; /* NULL */
    void *on_sample_error_user;         /* NULL */

    /* Where batch->data lives and what it holds. */
    gf_device device;      /* GF_DEVICE_AUTO */
    int device_id;         /* -1: the local rank (LOCAL_RANK,
                              OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID)
                              when set, else 0 */
    gf_dtype dtype;        /* GF_DTYPE_UINT8 */
    gf_layout layout;      /* GF_LAYOUT_NHWC (UINT8 is always NHWC) */
    float mean[4];         /* per channel, on 0..255 values: 0 */
    float std[4];          /* per channel: 1 (0 means 1; else >= 1e-3) */
    int flip_on_device;    /* 0: the decoder mirrors; 1: the device kernel
                              does (same bytes either way) */
    uint64_t pinned_max_bytes; /* cap on pinned host memory, 0 = none; over
                              it, or if pinning fails, slots are pageable
                              and stats.pageable_slots says so */
    uint64_t device_max_bytes; /* device memory budget, 0 = what is free */
    int autotune;          /* 0; 1: while running, add decode threads (from
                              `threads`, up to max_threads) and raise the
                              prefetch depth (from 2, up to prefetch_depth,
                              whose slots are allocated, and pinned within
                              pinned_max_bytes, up front) when the consumer
                              stalls. Batches are the same bytes either way */
    int max_threads;       /* autotune's ceiling: 0 = cores - 1, leaving a
                              core to the trainer's thread (at least 1) */
    int copy_stream_per_slot; /* CUDA. 0: one copy stream carries every
                              batch's copy and kernel, in order; 1: a stream
                              per slot, so one batch's copy may overlap
                              another's kernel or copy. Same bytes either
                              way; `bench --overlap --copy-streams` measures */
    gf_strictness strictness; /* GF_STRICT (0, so zeroed settings are strict) */
    /* LENIENT: called for every sample decoded although its decoder
     * warned, with the code and reason STRICT would have failed it with;
     * on the controller thread as gf_sample_error_fn is, but in the order
     * the decodes finish, not sampler order. NULL */
    gf_sample_error_fn on_sample_warning;
    void *on_sample_warning_user; /* NULL */
    gf_extensions extensions; /* GF_EXT_TORCHVISION: ImageFolder files */
    gf_folder_walk folder_walk; /* GF_FOLDER_WALK_GPUFEED: what an
                              ImageFolder walk leaves out (above) */
    /* Cap on the bytes the loader's read buffers hold at once (encoded
     * files being read or waiting to be decoded); 0 = GF_READ_BUDGET_DEFAULT.
     * At least 1 MiB. A read that would pass it waits while another large read is in
     * flight; a single file over it is still read, alone. Buffers over
     * read_budget_bytes / (2 x buffers) are freed after their sample, so a
     * data set of files that large allocates per sample: raise it for
     * those. A file over max_file_bytes is refused from its size, before
     * any byte is read, and one over 64 KiB whose first bytes are no
     * image magic (JPEG, PNG, GIF, BMP, PSD, PNM, WebP, TIFF; names ending
     * in .tga are exempt) is refused (GF_EFORMAT) after those 64 KiB. */
    uint64_t read_budget_bytes;
    gf_on_shard_error on_shard_error; /* GF_SHARD_FOLLOW: a damaged tar shard */
    /* Batches the consumer may hold at once (taken by gf_next, not yet
     * released); 0 = 16. A held batch keeps its slot, and gf_next adds a
     * slot for it (pinned within pinned_max_bytes, on CUDA a device slot
     * within device_max_bytes), so prefetch_depth slots stay free for
     * prefetching; past this many gf_next returns GF_EBUSY. */
    int max_held_batches;
    gf_order order;        /* GF_ORDER_AUTO */
    int shard_window;      /* SHARDS: shards whose samples are mixed
                              together; 0 = 4. More mixes better and holds
                              more shards open at once */
    /* Remote shards: `data` as http(s)://HOST/PATH/train-{000000..000127}.tar
     * or s3://BUCKET/PREFIX/train-{...}.tar (README: "Data on an object
     * store"). */
    const char *ca_file;   /* https: verify servers against this CA bundle
                              (PEM) instead of the system's; NULL */
    int remote_connections; /* connections to a host at once; 0 = 8 */
    int remote_retries;    /* a request cut short (reset, 5xx, stall) is
                              resumed from the byte it reached this many
                              times, after 0.1 s, 0.2 s, ... (at most 5 s,
                              with jitter), within remote_deadline_s; 5 */
    int remote_stall_s;    /* a stall: a request whose body brings under
                              1 KiB in this long (header bytes are no
                              progress, so a head that never ends is one;
                              a trickle of a byte a second is one), or
                              whose connection takes longer, is retried;
                              0 = 30. Index sidecars at open too */
    int prefetch_shards;   /* order shards: shards held in memory, the
                              window's and those fetched ahead; 0 =
                              2 x shard_window: the window
                              read and the next one fetched; at
                              least shard_window */
    uint64_t remote_buffer_bytes; /* cap on those shards' bytes (one larger
                              shard is still read, alone); 0 = 1 GiB */
    /* Remote shards, order shards: a directory where shards are kept
     * between epochs and runs, keyed by URL and ETag (a changed object is
     * fetched again), least recently used out first past cache_bytes;
     * shared safely by processes. A shard the cache may hold costs a
     * one-byte request that learns its ETag, then none. A directory that
     * cannot be written (read-only, full, a cap under one shard) only
     * stops caching: stats.cache_warning says why. gf_next's GF_EOF waits
     * for the writes of the shards the run fetched (30 s at most without
     * one finishing), as gf_close does: a loader opened next finds them.
     * NULL: no cache. With local data or order GLOBAL, GF_EINVAL. */
    const char *cache_dir;
    uint64_t cache_bytes;  /* the cache's cap; 0 = 80% of the space free on
                              its file system at gf_open */
    /* Remote shards: the most seconds one request (all its retries and
     * resumes together; not its wait for a connection while others hold
     * them) may take, index sidecars at open too: past it the request
     * fails, naming the URL and the deadline, however steadily its bytes
     * come (a body trickled just fast enough to beat remote_stall_s). 0 =
     * 20 x remote_stall_s x (remote_retries + 1): 3600 at the defaults. */
    int remote_deadline_s;
    /* Tar shards: the sample's fields, as WebDataset names members (the
     * extension after the key), in the order a batch gives them:
     * "jpg;png,cls,txt" (';': alternatives, the first the key has; an
     * explicit kind after ':', "seg.png:mask"). Kinds: image, label,
     * text (UTF-8), bytes (any member), with the rest (array, mask,
     * boxes) to come; a kind follows from the extension's last part
     * (jpg, png, ... image; cls label; txt text; else bytes). A key
     * without one of the fields, or with a text or bytes member over
     * GF_FIELD_BYTES_MAX, is not a sample (skipped and counted, or under
     * on_error = fail the open fails naming it); a text member that is
     * not UTF-8 is a bad sample. gf_batch.fields holds them. NULL or "":
     * an image (the first of any image extension) and .cls. */
    const char *fields;    /* (4 bytes of padding before it) */
    gf_interpolation interpolation; /* GF_INTERP_BILINEAR: the crop's resize */
    /* Augmentations after the crop and flip, in torchvision's words and
     * order, ';' between stages (README: "Augmentations"):
     * "ta_wide; erase p=0.25". NULL or "": none. The last may be
     * "mix mixup=1 cutmix=1 switch=0.5 classes=N": MixUp or CutMix over
     * each batch with soft targets (gf_batch.targets; float dtypes only). */
    const char *augment;   /* (4 bytes of padding before it) */
    /* data as a mix ("mix:0.7=imagenet/train|0.3=extra-{000..015}.tar",
     * README: "Mixing data sets"): what an epoch is, and what a label is. */
    gf_mix_epoch mix_epoch;   /* GF_MIX_EPOCH_CYCLE */
    gf_mix_labels mix_labels; /* GF_MIX_LABELS_OFFSET */
    uint8_t reserved[8];   /* zero; room for fields without an ABI break */
} gf_settings;

#define GF_READ_BUDGET_DEFAULT (256ull << 20) /* 256 MiB */

/* The library's (gf_next hands out a pointer into its ring): fields may be
 * added at the end. A delivered batch is whole; a failure is gf_next()'s
 * return code, so there is no per-batch status. */
/* A sample field's kind (settings.fields). */
typedef enum gf_field_kind {
    GF_FIELD_IMAGE, /* the batch's data (and pixels) */
    GF_FIELD_LABEL, /* the batch's labels */
    GF_FIELD_TEXT,  /* UTF-8 bytes, not NUL-terminated */
    GF_FIELD_BYTES, /* a member's bytes as stored */
    GF_FIELD_ARRAY, /* a .npy: one dtype and shape across the data set */
    GF_FIELD_MASK,  /* a PNG of class ids, cropped and flipped with the image */
    GF_FIELD_BOXES, /* a .npy (N, 4|5) of x1 y1 x2 y2 [class], moved with the image */
} gf_field_kind;

/* The most bytes a text, bytes or boxes member may have. */
#define GF_FIELD_BYTES_MAX 65536u
/* The most bytes an array member may have. */
#define GF_FIELD_ARRAY_BYTES_MAX (64u << 20)
/* A field's dimensions, the batch's included. */
#define GF_FIELD_DIMS_MAX 6

/* One field of a delivered batch, in settings.fields' order. */
typedef struct gf_field {
    const char *name;        /* as settings.fields names it: "txt", "jpg;png" */
    gf_field_kind kind;
    /* TEXT, BYTES: sample i's member is lengths[i] bytes at data +
     * offsets[i], in host memory (on CUDA too), valid until release; the
     * samples' bytes do not overlap but need not follow one another.
     * IMAGE, LABEL: NULL (the batch's data, pixels and labels). */
    const uint8_t *data;
    const uint64_t *offsets;
    const uint32_t *lengths;
    /* ARRAY, MASK: data is one tensor of dtype and shape[0, ndim), shape[0]
     * the batch's count, C order, in device memory on CUDA (ready with the
     * batch: gf_batch_wait), else host memory; valid until release. BOXES: sample i's boxes are lengths[i] bytes of float32 rows
     * of shape[1] (4 or 5) at data + offsets[i], in host memory; ndim 2,
     * shape[0] 0. TEXT, BYTES: dtype UINT8, ndim 1, shape[0] count. */
    gf_dtype dtype;
    int ndim;
    int64_t shape[GF_FIELD_DIMS_MAX];
    gf_device device;        /* where data is: CUDA for a CUDA batch's arrays,
                                masks and image (the batch's data), else CPU */
} gf_field;

typedef struct gf_batch {
    /* The batch as the trainer consumes it: count samples of dtype and
     * layout, in device memory when device == GF_DEVICE_CUDA (wait for
     * ready_event first: gf_batch_wait), else host memory. Valid until
     * gf_release*() (on CUDA: until the work queued on the release stream
     * before the release has run). */
    void *data;
    gf_dtype dtype;
    gf_layout layout;
    gf_device device;
    void *ready_event;   /* cudaEvent_t recorded after the copy and kernel;
                            NULL on the CPU */
    /* The decoded uint8 pixels, count x height x width x channels, in host
     * memory; valid until release. NULL on CUDA, where the host slot goes
     * back to the ring as soon as its copy has completed. */
    uint8_t *pixels;
    int32_t *labels;     /* count labels */
    int64_t *indices;    /* count data set indices (list/folder order) */
    int count;           /* samples; < batch_size only for an epoch's last batch */
    int height, width, channels;
    uint64_t epoch;      /* epoch these samples belong to */
    uint64_t position;   /* gf_seek(epoch, position) resumes right after
                            this batch; == epoch_samples after an epoch's
                            last batch (gf_seek rolls it to the next) */
    uint32_t slot_;      /* private */
    /* The sample's fields (settings.fields), n_fields of them; the
     * default's two are the image and the label. */
    int n_fields;
    const gf_field *fields;
    /* settings.augment's `mix` (MixUp/CutMix): the soft targets, count x
     * n_classes float32, row i lam * onehot(labels[i]) + (1 - lam) *
     * onehot(labels[i - 1]) (row 0 pairs with the last), where data is
     * (device memory on CUDA, ready with it); NULL and 0 without mix.
     * Valid as data is. */
    const float *targets;
    int n_classes;
    /* data as a mix: each sample's source, 0 .. gf_sources() - 1 in the
     * order data names them; NULL otherwise. Valid as labels are. */
    const int32_t *sources;
} gf_batch;

#define GF_RECENT_ERRORS 8

typedef struct gf_sample_error {
    int64_t sample;      /* data set index */
    int code;            /* GF_E* */
    char path[256];      /* relative to the data set root; for tar shards
                            "train-000003.tar:key.jpg" */
    char reason[160];
} gf_sample_error;

typedef struct gf_stats {
    uint64_t samples, batches; /* delivered by gf_next() */
    uint64_t epoch, position;  /* where the next delivered batch starts */
    double elapsed_s;          /* since gf_open() */
    double wait_s;             /* time the caller spent waiting in gf_next():
                                  the input stall */
    double read_busy_s;        /* summed over threads */
    double decode_busy_s;      /* decode + transform, summed over threads */
    uint64_t bytes_read;       /* from files, failed samples' included */
    uint64_t errors;                            /* bad samples, all kinds */
    uint64_t errors_by_kind[GF_SAMPLE_ERROR_KINDS_MAX];
                       /* [gf_sample_error_kind(code)], = [GF_ENOENT - code] */
    gf_sample_error recent[GF_RECENT_ERRORS];   /* newest first */
    int n_recent;
    gf_io reader;              /* backend in use */
    uint64_t decoded_turbo, decoded_stb; /* samples per decoder */
    int threads, prefetch_depth, queue_depth, batch_size;
    uint64_t ring_bytes;       /* all batch slots, those added for held
                                  batches included */
    uint64_t buffer_bytes;     /* read and decode scratch buffers now */
    uint64_t dataset_samples;  /* samples in the index */
    uint64_t epoch_samples;    /* this rank's samples per epoch (the
                                  order's, after gf_set_order) */
    int classes;
    gf_device device;          /* where batches are delivered */
    int device_id;             /* CUDA device ordinal, -1 on the CPU */
    char device_note[160];     /* why AUTO chose the CPU, or a warning */
    uint64_t pinned_bytes;     /* pinned host ring memory */
    int pageable_slots;        /* host slots that could not be pinned */
    uint64_t device_bytes;     /* device ring memory */
    int rank, world;           /* the share this loader reads */
    int autotune;              /* 1 if the loader tunes itself; then
                                  threads/prefetch_depth are its choice now */
    uint64_t autotune_changes; /* settings it changed */
    double convert_busy_s;     /* CPU twin of the device kernel, summed */
    /* What indexing left out (tar shards; 0 for a folder or list):
     * members that cannot be samples (links, devices, unsafe names, a
     * second image or label of a key), keys without an image or a valid
     * .cls; and all warnings (those and archive oddities such as a lone
     * zero block; for an ImageFolder each entry gf_skipped_entry names;
     * 0 for a list), the first described in dataset_warning ("" if none). */
    uint64_t shard_members_skipped, shard_keys_skipped, dataset_warnings;
    char dataset_warning[160];
    uint64_t shards;           /* tar shards in the source, 0 for a folder
                                  or list */
    /* CUDA: the loader's own host-to-device copies, one per batch (pixels
     * and flips), timed by events on the copy stream around each: bytes,
     * copies and GPU seconds of those completed so far. Bandwidth at the
     * real batch size: h2d_bytes / h2d_s. 0 on the CPU. */
    uint64_t h2d_bytes, h2d_copies;
    double h2d_s;
    uint64_t decode_warnings;  /* samples decoded although the decoder
                                  warned (strictness LENIENT; 0 otherwise,
                                  where a warning is the sample's error) */
    uint64_t decoded_spng, decoded_webp; /* samples per decoder, beside
                                  decoded_turbo and decoded_stb */
    /* ImageFolder: directories walked, and those reached again through a
     * link (a loop, or a second link to one walked) and not walked twice
     * (folder_walk TORCHVISION: the loops alone). 0 for a list or shards. */
    uint64_t folder_dirs, folder_dirs_again;
    uint64_t folder_skipped[GF_SKIPPED_MAX]; /* [GF_SKIPPED_*]: files the
                                  ImageFolder left out, by extension */
    /* The read budget in force (settings.read_budget_bytes, resolved), the
     * most bytes the read buffers held at once (over the budget only when
     * one file larger than it was read alone), and the reads it held back
     * until others finished. */
    uint64_t read_budget_bytes, read_bytes_peak, read_budget_waits;
    /* Tar shards taken in part under on_shard_error SKIP, and the members
     * lost with them (gf_damaged_shards() lists them). */
    uint64_t shards_damaged, shard_members_lost;
    /* Remote shards (http, https, s3): requests made (retries included),
     * retries (a reset, a 5xx or a stall, each resumed from the byte it
     * reached), bytes received, and the seconds the decode threads had
     * nothing to decode while remote reads were in flight: the network's
     * share of the input stall. 0 for local data. */
    uint64_t remote_requests, remote_retries, remote_bytes;
    double remote_wait_s;
    /* io = AUTO on io_uring: samples the decode threads read themselves
     * from the page cache, and tries that found a sample not all cached
     * and left it to io_uring (counted again there, in bytes_read). */
    uint64_t page_cache_reads, page_cache_misses;
    /* settings.cache_dir: shards read from the cache, and shards fetched
     * whole while it was on (each then written to it, if it could take
     * it); why it stopped caching (or the first copy it dropped as
     * damaged: its checksum failed), "" if it did not. */
    uint64_t cache_hits, cache_misses;
    char cache_warning[192];
    /* What the last gf_set_state did across a change of world ("resumed
     * a 8-rank state on 6 ranks at epoch 3, sample 412160 of 1281167"),
     * "" if it did not change the world. */
    char resume_note[80];
    uint8_t reserved[8];       /* zero; room for fields without an ABI break:
                                  gf_get_stats writes sizeof(gf_stats) bytes,
                                  a new field takes its place from here */
} gf_stats;

/* gf_stats' values as a table: X(KIND, field) for each field that is one
 * value, in the struct's order; KIND is U64 (uint64_t), INT (int or an
 * enum), FLAG (int, 0 or 1), DBL (double) or STR (a char array, NUL
 * terminated). Not rows: the arrays errors_by_kind, recent (with its
 * length n_recent) and folder_skipped, and reserved. The Python stats()
 * dict and the faces of gpufeed bench --json are made from it; a new
 * field is a row here, after the row of the field it follows. */
#define GF_STATS_MAP(X)                                                        \
    X(U64, samples) X(U64, batches) X(U64, epoch) X(U64, position)             \
    X(DBL, elapsed_s) X(DBL, wait_s) X(DBL, read_busy_s)                       \
    X(DBL, decode_busy_s) X(U64, bytes_read) X(U64, errors)                    \
    X(INT, reader) X(U64, decoded_turbo) X(U64, decoded_stb)                   \
    X(INT, threads) X(INT, prefetch_depth) X(INT, queue_depth)                 \
    X(INT, batch_size) X(U64, ring_bytes) X(U64, buffer_bytes)                 \
    X(U64, dataset_samples) X(U64, epoch_samples) X(INT, classes)              \
    X(INT, device) X(INT, device_id) X(STR, device_note)                       \
    X(U64, pinned_bytes) X(INT, pageable_slots) X(U64, device_bytes)           \
    X(INT, rank) X(INT, world) X(FLAG, autotune) X(U64, autotune_changes)      \
    X(DBL, convert_busy_s) X(U64, shard_members_skipped)                       \
    X(U64, shard_keys_skipped) X(U64, dataset_warnings)                        \
    X(STR, dataset_warning) X(U64, shards) X(U64, h2d_bytes)                   \
    X(U64, h2d_copies) X(DBL, h2d_s) X(U64, decode_warnings)                   \
    X(U64, decoded_spng) X(U64, decoded_webp) X(U64, folder_dirs)              \
    X(U64, folder_dirs_again) X(U64, read_budget_bytes)                        \
    X(U64, read_bytes_peak) X(U64, read_budget_waits)                          \
    X(U64, shards_damaged) X(U64, shard_members_lost)                          \
    X(U64, remote_requests) X(U64, remote_retries) X(U64, remote_bytes)        \
    X(DBL, remote_wait_s) X(U64, page_cache_reads)                             \
    X(U64, page_cache_misses) X(U64, cache_hits) X(U64, cache_misses)          \
    X(STR, cache_warning) X(STR, resume_note)

/* The decoders gf_stats counts samples for, each in decoded_<name>, in
 * the order reports list them: libjpeg-turbo, stb_image (and gpufeed's
 * own PNM readers), libspng, libwebp. */
#define GF_DECODED_MAP(X) X(turbo) X(stb) X(spng) X(webp)

typedef struct gf_loader gf_loader;

GF_API const char *gf_version(void);
GF_API const char *gf_strerror(int code); /* never NULL */
GF_API const char *gf_err_name(int code); /* "GF_ETRUNC"; never NULL */
/* A sample error's index in stats.errors_by_kind (GF_KIND_*), or -1 when
 * code is not a sample error. */
GF_API int gf_sample_error_kind(int code);

/* What this build and machine offer the loader, for diagnostics
 * (`gpufeed doctor`). CUDA devices are not probed here: the library's
 * CUDA path reports its own reasons at gf_open() (stats.device_note). */
typedef struct gf_probe_info {
    const char *version;     /* gf_version() */
    /* io_uring, tested the way a loader with the default queue depth
     * (64) would set it up. */
    int have_uring_build;    /* 1 if built with liburing */
    int uring_ok;            /* 1 if GF_IO_AUTO would use io_uring here */
    int uring_errno;         /* errno of io_uring_queue_init (ENOSYS, EPERM,
                                EINVAL, ENOMEM...), 0 if it succeeded or
                                was not tried */
    int uring_disabled;      /* /proc/sys/kernel/io_uring_disabled, -1 if
                                absent (kernels before 6.6) */
    char uring_why[160];     /* why not, as gf_open(GF_IO_URING) says it;
                                "" when uring_ok */
    char kernel[65];         /* uname release, "6.8.0-45-generic" */
    /* Decoders: stb_image is always built in. */
    int have_turbo;          /* 1 if libjpeg-turbo decodes JPEG */
    int turbo_version;       /* built against: 2001005 = 2.1.5; 0 if none */
    int have_cuda_build;     /* 1 if built with CUDA */
    int cpu_avx2;            /* 1 if the CPU has AVX2 */
    const char *resample_isa; /* kernels the resampler runs: "avx2", "sse2"
                                 or "c" (GF_NO_AVX2=1 in the environment
                                 turns AVX2 off) */
    int cores;               /* CPUs this process may run on (affinity):
                                what threads = 0 counts */
    int cores_online;        /* online CPUs in the machine */
    int have_spng;           /* 1 if libspng decodes PNG (checked CRCs) */
    int have_webp;           /* 1 if libwebp decodes WebP */
    uint8_t reserved[56];    /* zero; room for fields without an ABI break */
} gf_probe_info;

/* Fills *out (every field, also on failure). Costs one io_uring setup and
 * teardown; thread-safe. Returns 0, or GF_EINVAL if out is NULL. */
GF_API int gf_probe(gf_probe_info *out);

GF_API void gf_default_settings(gf_settings *s);

/* ---- Settings by name ----------------------------------------------------
 * One table in the library describes every value setting of gf_settings
 * (not data or the callbacks): its name (the field's), type, default,
 * bounds, accepted spellings and help. gf_default_settings writes its
 * defaults; gf_open, gf_index_open, gf_decoder_open and gf_decode_image
 * check a settings struct against it; the CLI's options and the Python
 * keywords are made from it. */
typedef enum gf_setting_type {
    GF_SETTING_INT,    /* int: a decimal integer */
    GF_SETTING_U64,    /* uint64_t: a decimal integer, not negative */
    GF_SETTING_FLOAT,  /* float */
    GF_SETTING_FLOAT4, /* float[4], per channel: "v" sets every channel;
                          "a,b[,c[,d]]" sets channels 0.. in order, the
                          rest keep their value */
    GF_SETTING_CHOICE, /* an enum, by name: choices[value] (or aliases[value]) */
    GF_SETTING_FLAG,   /* int 0 or 1: 0|1|false|true|no|yes|off|on */
    GF_SETTING_PATH,   /* const char *, a path: any text, "" too, kept as
                          the pointer given (the caller's, which must
                          outlive the settings' use); default NULL, whose
                          meaning is zero ("the system's") */
    GF_SETTING_TEXT,   /* const char *, as PATH, but not a path (a list,
                          a spec): checked by the loader at gf_open */
} gf_setting_type;

/* flags */
#define GF_SETTING_ZERO_PICKS 1u    /* 0 is also accepted: "pick for me" (zero) */
#define GF_SETTING_MIN_EXCLUSIVE 2u /* FLOAT*: the value must be above min_float */

/* The library's (gf_setting_at): callers never allocate one, so fields may
 * be added at the end. Pointers are static. */
typedef struct gf_setting_info {
    const char *name;          /* the gf_settings field: "prefetch_depth" */
    gf_setting_type type;
    size_t offset;             /* offsetof(gf_settings, name) */
    const char *default_text;  /* gf_default_settings' value, as
                                  gf_settings_set takes it; NULL for a
                                  PATH (its default is NULL) */
    int64_t min_int;           /* INT, U64: bounds, inclusive */
    uint64_t max_int;
    double min_float, max_float; /* FLOAT, FLOAT4: bounds (values finite) */
    unsigned flags;            /* GF_SETTING_* */
    const char *zero;          /* ZERO_PICKS: what 0 means ("cores - 1");
                                  PATH: what NULL means ("no cache") */
    /* CHOICE: the names in value order, NULL-terminated, and beside each
     * another accepted spelling or NULL ("uint8" and "u8"); NULL for
     * other types. INT: the only values allowed, if not NULL
     * (channels: "1", "3", "4"); aliases NULL. */
    const char *const *choices;
    const char *const *aliases;
    const char *help;          /* one line */
} gf_setting_info;

/* The table's rows: gf_setting_at(0 .. gf_setting_count() - 1), NULL past
 * the end. gf_setting_find: by name ('-' may stand for '_'), or NULL. */
GF_API int gf_setting_count(void);
GF_API const gf_setting_info *gf_setting_at(int i);
GF_API const gf_setting_info *gf_setting_find(const char *name);

/* Sets setting `name` of s from its text: gf_settings_set(&s, "dtype",
 * "float16", why, sizeof why). Nothing is written unless the value is
 * valid on its own (its type, bounds and spellings; what depends on other
 * settings, such as scale_min <= scale_max, gf_open checks). A PATH keeps
 * value itself, not a copy. Returns 0, or
 * GF_EINVAL with why = "dtype: 'float64' is not one of uint8, float32,
 * float16, bfloat16 (also u8, f32, f16, bf16)" (why may be NULL). */
GF_API int gf_settings_set(gf_settings *s, const char *name, const char *value, char *why,
                           size_t why_len);
/* Setting `name` of s as text gf_settings_set takes back (a CHOICE by its
 * first name, a float in the fewest digits that read back the same; a
 * PATH as it is, "" for NULL). Returns its length (truncated to
 * len - 1), or GF_EINVAL for an unknown name or a NULL argument. */
GF_API int gf_settings_get(const gf_settings *s, const char *name, char *buf, size_t len);

/* Indexes the data set, starts the threads and begins prefetching.
 * Returns 0, or GF_EINVAL (a setting: "invalid settings: batch_size: 0 is
 * out of range 1..65536"; or the launcher's environment, naming the variable),
 * GF_EDATASET, GF_ENODEV (a forced backend is missing), GF_ENOMEM,
 * GF_ETHREAD, GF_EMFILE (too few file descriptors left for the loader's
 * loop and reads: the message says how many it needs and the limit).
 * *out is set even on failure (unless the loader itself could
 * not be allocated) so gf_last_error() can say why: gf_close() it either
 * way. Pointers in s are not kept past the call, except
 * on_sample_error_user and on_sample_warning_user. */
GF_API int gf_open(gf_loader **out, const gf_settings *s);

/* gf_open over samples given in memory instead of s->data's folder, list
 * or shards (torchvision's ImageFolder.samples, say): n file paths (any
 * bytes but NUL), absolute or relative to s->data, which names a
 * directory or is NULL (then relative to the current directory at this
 * call), and their labels, each 0 .. 2147483646; classes = max label + 1,
 * so a label is below max(n, 1048576): a set of n samples cannot mean more
 * classes (one label of 2147483646 would make 2^31 class names; a list
 * file's or a tar shard's label is held to the same, naming its line or
 * member).
 * Both arrays are copied: neither is kept past the call. Sample i is
 * paths[i]: gf_sample_path(l, i) gives it back byte for byte, and a file
 * that cannot be read or decoded is a sample error at delivery naming it,
 * as for a list file. Everything else is gf_open's, returns included;
 * GF_EINVAL also for n == 0, a NULL array or path, or a label out of
 * range or past that bound (the message names the sample's index);
 * GF_EDATASET when s->data is not a
 * directory. */
GF_API int gf_open_samples(gf_loader **out, const gf_settings *s, const char *const *paths,
                           const int32_t *labels, uint64_t n);

/* The next batch in sampler order; blocks until it is ready.
 * Returns 0 and *out, GF_EOF after the last epoch (with cache_dir, once
 * the shards fetched are written there), or (on_error = fail)
 * the failed sample's code with gf_last_error() naming it; the loader
 * then stays failed until gf_seek(). GF_EDATASET (failed the same way)
 * when a whole epoch delivered no batch because every sample failed
 * (on_error = skip): otherwise an unbounded run would never return.
 * The batch and its arrays live in a slot of their own: valid until
 * gf_release(l, batch) or gf_close(). Batches may be held and released
 * in any order: each held batch keeps its slot, and gf_next adds slots so
 * that prefetch_depth are not held when it is called. GF_EBUSY when
 * max_held_batches are held, or when every slot is held and the memory
 * caps (pinned_max_bytes is not one: past it slots are pageable;
 * device_max_bytes, free memory) refuse another; gf_last_error() says how
 * many batches are held and which (their epoch and position, the oldest
 * few). Releasing one lets the next call go on. gf_next is
 * gf_next_timed(l, out, -1). */
GF_API int gf_next(gf_loader *l, gf_batch **out);

/* gf_next, waiting at most timeout_ns nanoseconds (on CLOCK_MONOTONIC) for
 * the next batch: 0 looks without waiting, a negative timeout waits as
 * long as it takes. Returns what gf_next returns, or GF_EAGAIN when no
 * batch became ready in time: then *out is NULL and nothing changed (no
 * batch taken or skipped, gf_get_state and gf_last_error as they were),
 * so the next call delivers exactly the batch this one would have. The
 * time waited counts in stats.wait_s. */
GF_API int gf_next_timed(gf_loader *l, gf_batch **out, int64_t timeout_ns);

/* Gives a batch's slot back to the loader. Returns 0 or GF_EINVAL.
 * On CUDA this is gf_release_stream(l, b, NULL). */
GF_API int gf_release(gf_loader *l, gf_batch *b);

/* CUDA: gives the batch back once the work queued on `stream` (a
 * cudaStream_t; NULL = the legacy default stream of the loader's device,
 * from any thread, also one whose current device is another or none: the
 * loader records it there, and never changes the calling thread's
 * device) so far has run: an event is recorded on it and the next copy
 * into this device slot waits for it on the GPU. The host does not block.
 * On the CPU, stream is ignored.
 * Returns 0; GF_EINVAL (not a held batch, or not a stream: the batch stays
 * held); or GF_ENODEV if the device failed (a kernel fault): the loader
 * stops, and gf_next returns GF_ENODEV saying why. */
GF_API int gf_release_stream(gf_loader *l, gf_batch *b, void *stream);

/* CUDA: makes `stream` wait for the batch's copy and kernel
 * (cudaStreamWaitEvent); the host does not block. NULL = the legacy
 * default stream of the loader's device, from any thread, as for
 * gf_release_stream. CPU: nothing to wait for. b must be held (before its
 * gf_release*), so its loader is open. Returns 0, GF_EINVAL or GF_ENODEV. */
GF_API int gf_batch_wait(const gf_batch *b, void *stream);

/* Restarts delivery at sample `position` of `epoch` (a batch's
 * epoch/position resumes right after it). Discards prefetched batches not
 * yet returned by gf_next; batches held stay valid until released (not
 * concurrently with this call). Returns 0 or GF_EINVAL. O(1) in the data
 * set size. */
GF_API int gf_seek(gf_loader *l, uint64_t epoch, uint64_t position);

/* The caller's sampler for one epoch (torch's RandomSampler or
 * DistributedSampler drawn in Python, say): the loader delivers, as epoch
 * `epoch`, exactly the n data set indices of `order` (repeats allowed),
 * in that order, in batches of batch_size (the last shorter, or dropped
 * under drop_last: an order shorter than a batch then delivers none),
 * then GF_EOF until the next gf_set_order. Settings rank, world, shuffle
 * and epochs do not apply: the caller's sampler already took this rank's
 * share. Random crops and flips are keyed by (seed, epoch, sample index),
 * so the same (seed, epoch, order) give the same bytes whatever the
 * threads or prefetch depth. order is copied. Prefetched batches are
 * discarded, as by gf_seek; held batches stay valid until released.
 * While an order is in force (from then on) gf_seek(epoch, position)
 * moves within it (position <= n; epoch + 1, 0 is its end),
 * gf_get_state says (seed, epoch, position in the order),
 * stats.epoch_samples is n, and gf_set_state is refused: the caller owns
 * the order (set it again, then gf_seek). Returns 0; GF_EINVAL (an index
 * < 0 or >= dataset_samples: the message names its position; order NULL
 * with n > 0); GF_ENOMEM. */
GF_API int gf_set_order(gf_loader *l, uint64_t seed, uint64_t epoch, const int64_t *order,
                        uint64_t n);

/* Bytes per element of a dtype (1, 4, 2, 2), 0 for an unknown one. */
GF_API size_t gf_dtype_size(gf_dtype dtype);

/* Where a loader is: everything needed to resume it exactly, on this
 * world or another. Save it with a checkpoint; plain data, so it can be
 * written as bytes. Every rank of a data-parallel job is at the same
 * position, so any rank's state is the job's (rank 0 usually saves it). */
typedef struct gf_state {
    uint32_t version;    /* GF_STATE_VERSION */
    uint32_t rank, world; /* who saved it */
    uint32_t shard_window; /* the shard order's window; 0 in the global order */
    uint64_t seed;
    uint64_t epoch, position; /* where the next batch gf_next() returns starts */
    /* Version 3. The data set's size and gf_index_hash: a state of
     * another data set is refused. */
    uint64_t samples, index_hash;
    /* Version 3. An epoch a change of world split (gf_set_state below):
     * it began on rest_world ranks, which delivered rest_position samples
     * each, and later worlds took rest_taken of the samples they left
     * before this world; position is this world's in that rest. 0, 0, 0:
     * the epoch is this world's own. */
    uint32_t rest_world, reserved_;
    uint64_t rest_position, rest_taken;
} gf_state;
/* States of versions 1 (global order) and 2 (shard order), from earlier
 * libraries, are read as version 3 without the data set's identity and
 * without a change of world in their epoch. */
#define GF_STATE_VERSION 3
#define GF_STATE_VERSION_SHARDS 2

/* The state after the last batch gf_next() returned (or at the start).
 * Returns 0 or GF_EINVAL. An observer: safe from any thread (the first
 * call computes gf_index_hash: one pass over the index). */
GF_API int gf_get_state(gf_loader *l, gf_state *st);

/* Resumes from a saved state: the following batches are exactly those the
 * saved run would have delivered next. Refused (GF_EINVAL, the message
 * naming the field and both values): another version, seed, data set
 * (samples, index_hash), order (global, or shards with another
 * shard_window), or an order set by gf_set_order in force.
 *
 * Another world (elastic resume): a state saved on W ranks resumes on W'
 * ranks (more or fewer), every rank given the same state. Over the rest
 * of the state's epoch the W' ranks deliver exactly the samples the W
 * ranks had not delivered, each once, in the epoch's order, taken
 * interleaved (rank r' the rest's samples r', r' + W', ...; in the shard
 * order every rank then reads the rest's shards, each once); later epochs
 * are a W'-rank run's. Each rank's share of the rest is equal: padded
 * with the epoch's first samples (ceil), or under drop_last cut (floor:
 * fewer than W' samples of the rest, then the last short batch, go
 * undelivered), as for a whole epoch. gf_seek within that epoch keeps
 * its rest; a seek to another epoch ends it (every epoch is then this
 * world's own). The same world resumes any rank's state as is.
 * stats.resume_note says what a change of world did (a mix's "samples"
 * are its epoch's sequence's positions).
 * Held batches stay valid, as for gf_seek. */
GF_API int gf_set_state(gf_loader *l, const gf_state *st);

/* Fills *st, every byte (reserved ones 0). Returns 0 or GF_EINVAL. An
 * observer: safe from any thread. */
GF_API int gf_get_stats(gf_loader *l, gf_stats *st);

/* This rank's positions in epoch: the caller's order's, the rest of an
 * epoch a change of world split, a mix's epoch under mix_epoch FIRST
 * (each its own length), else every epoch's share. 0 for no loader or an
 * epoch past the caller's order. Any thread. */
GF_API uint64_t gf_epoch_samples(gf_loader *l, uint64_t epoch);

/* One source of a mix (settings.data "mix:..."), or the data set itself
 * when data is not a mix. Counts are this loader's since gf_open. */
typedef struct gf_source_stats {
    const char *data;        /* as data names it (the loader's; valid until
                                gf_close) */
    double weight;           /* its share of the weights, 0..1 (1 alone) */
    uint64_t size;           /* its samples; its data set indices are
                                [first_index, first_index + size) */
    uint64_t first_index;
    int label_offset;        /* added to its labels (mix_labels OFFSET) */
    int n_classes;           /* its own classes */
    uint64_t samples;        /* delivered by gf_next */
    double share;            /* samples / all samples delivered (0 before any) */
    double wait_s;           /* gf_next's waits for batches whose last sample
                                to arrive was this source's: its input stall */
    uint64_t epoch;          /* its own epoch at the next delivered batch */
    uint8_t reserved[32];    /* zero */
} gf_source_stats;

/* The sources of l's data: a mix's count, 1 otherwise. */
GF_API int gf_sources(const gf_loader *l);
/* Source k's figures into *st (every byte written). 0, or GF_EINVAL (no
 * loader or st, k out of range). */
GF_API int gf_source_stats_get(gf_loader *l, int k, gf_source_stats *st);

#define GF_RECENT_WARNINGS 8

/* The last samples (up to GF_RECENT_WARNINGS) that decoded although their
 * decoder warned (strictness LENIENT; stats.decode_warnings counts them
 * all), newest first, each with the code and reason STRICT would have
 * failed it with. Writes up to max; returns how many, or GF_EINVAL. An
 * observer: safe from any thread. */
GF_API int gf_recent_warnings(gf_loader *l, gf_sample_error *out, int max);

/* The tar shards taken in part under on_shard_error SKIP, in source order,
 * as on_sample_error saw them (sample -1, path = the shard, the code,
 * "offset N: reason; K members kept, L lost"): writes the first
 * min(max, n) and returns n (all of them, INT_MAX at most), or GF_EINVAL.
 * An observer: safe from any thread. */
GF_API int gf_damaged_shards(gf_loader *l, gf_sample_error *out, int max);

/* The data set's samples by index (list/folder/archive order, as in
 * batch->indices), for tools that need more than batches: checking,
 * benchmarking, exporting. These read the index built by gf_open(), never
 * the loader's queues or stats: safe from any thread, alongside gf_next(),
 * and they do not change gf_last_error(). index runs from 0 to
 * stats.dataset_samples - 1. */

/* Reads the encoded bytes of sample `index` (its file, or its image
 * member in a tar shard), exactly as stored, nothing decoded: *data, *len
 * bytes, is the caller's: free it with gf_free(). Files over
 * settings.max_file_bytes are refused. Returns 0; GF_EINVAL (a NULL argument, or index >=
 * dataset_samples); or a sample error (GF_ENOENT, GF_EIO, GF_EEMPTY,
 * GF_ETRUNC: the shard ended inside the member, GF_ETOOBIG, GF_ENOMEM) with
 * why (may be NULL) = "path: reason", path as gf_sample_path() gives it.
 * On failure *data = NULL and *len = 0. */
GF_API int gf_read_sample(gf_loader *l, uint64_t index, void **data, size_t *len, char *why,
                          size_t why_len);

/* The display path of sample `index`: relative to the data set's root (the
 * ImageFolder directory or the list file's directory), the path exactly as
 * gf_open_samples was given it, or for tar shards
 * "train-000003.tar:key.jpg" (the shard's base name, ':', the member name).
 * The name bad-sample reports use. NULL if index >= dataset_samples or l is
 * NULL. Valid until gf_close(). */
GF_API const char *gf_sample_path(gf_loader *l, uint64_t index);

/* The label of sample `index`, or GF_EINVAL if index >= dataset_samples or
 * l is NULL. */
GF_API int32_t gf_sample_label(gf_loader *l, uint64_t index);

/* The classes, as gf_stats.classes: an ImageFolder's sub-folders, tar
 * shards' classes.txt (below), else the largest label + 1; 0 if l is
 * NULL. */
GF_API int gf_class_count(gf_loader *l);

/* The name of class (label) i: an ImageFolder's sub-folder name (the
 * folder's bytes, as torchvision's ImageFolder.classes[i]); for tar shards
 * line i of classes.txt beside the first shard, when that file names every
 * label the shards use (gpufeed prepare writes it; one that does not is
 * ignored with a dataset warning); else NULL (a list file's or shards'
 * labels are bare numbers), or if i is out of range. Valid until
 * gf_close(). */
GF_API const char *gf_class_name(gf_loader *l, int i);

/* The data set's identity: a 64-bit FNV-1a hash over every sample's
 * display path (gf_sample_path; a mix's file as its source names it, so
 * a set mounted elsewhere is the same) and label, in index order; the whole set,
 * so every rank has the same; for a mix its weights and mix_epoch too (a
 * position of one mix is other samples in another). Never 0 (0: l is NULL). Computed in one pass
 * on the first call, then cached: any thread. For a checkpoint, beside
 * gf_state, to refuse resuming over another data set. */
GF_API uint64_t gf_index_hash(gf_loader *l);

/* The ImageFolder entries left out for what they are, not for their
 * extension, where torchvision's ImageFolder would take them: under
 * folder_walk GPUFEED AppleDouble files named like images
 * (stats.folder_skipped[GF_SKIPPED_APPLEDOUBLE]), directories reached
 * again within a class through a link, a loop or a second one
 * (stats.folder_dirs_again), links in a class to a directory outside that
 * class folder (the root, another class, elsewhere: not walked, so that no
 * folder takes another's label); under TORCHVISION links back to a
 * directory on their own walk's path (loops, stats.folder_dirs_again); in
 * both class folders that are the root or above it (kept as labels
 * without samples); in walk order (stats.dataset_warnings counts them
 * too). For tar shards, the keys without a member of a field beyond the
 * image and label (settings.fields), in shard order: path the member
 * that is not there ("train-000003.tar:key.latent.npy", the field's
 * first alternative), reason "field 'latent.npy': no .latent.npy member
 * ..." (stats.shard_keys_skipped counts them too). Returns how many there were; for i below that and
 * GF_SKIPPED_NAMED_MAX (the first ones are named), sets *path (from the
 * data set's root) and *reason, valid until gf_close. Any thread. */
#define GF_SKIPPED_NAMED_MAX 32
GF_API uint64_t gf_skipped_entry(gf_loader *l, uint64_t i, const char **path,
                                 const char **reason);

/* The message for the loader's last failure (names the sample and
 * reason), or "" if none. An observer: safe from any thread, also while a
 * loader thread sets a new message. The text is a copy in a buffer of the
 * calling thread, valid until that thread calls gf_last_error() again (on
 * any loader) or ends. */
GF_API const char *gf_last_error(const gf_loader *l);

/* Stops and joins every thread, frees everything, sets *l = NULL.
 * Outstanding batches become invalid. NULL and *l == NULL are no-ops. */
GF_API void gf_close(gf_loader **l);

/* A decoder with the loader's transform, for decoding outside a loader
 * (tools, evaluation, benchmarks). Keeps its scratch buffers between
 * calls; use one per thread. */
typedef struct gf_decoder gf_decoder;

/* Returns 0, GF_EINVAL (s fails gf_open's checks; the message is not
 * kept: gf_decode_image gives it) or GF_ENOMEM. s is copied; s->data is
 * not used. */
GF_API int gf_decoder_open(gf_decoder **out, const gf_settings *s);

/* Decodes one encoded image as the loader would for sample `index` of
 * `epoch`, into out (s->height x s->width x s->channels bytes). Returns 0
 * or a sample error code (GF_ETRUNC, GF_EFORMAT, ...) with the reason in
 * why (may be NULL). */
GF_API int gf_decoder_decode(gf_decoder *d, const void *data, size_t len, uint64_t epoch,
                             uint64_t index, uint8_t *out, char *why, size_t why_len);

/* Decodes the whole image (no crop, flip or randomness) at its full size
 * and, when its longer side is over max_side (> 0), downscales it with
 * the loader's resampler, the antialiased triangle filter of PIL and of
 * torchvision's Resize(antialias=True), each axis mapped whole: the
 * longer side becomes max_side, the shorter round(shorter * max_side /
 * longer) (half up, at least 1). Never enlarged; max_side 0 keeps the
 * size. Channels, decoder, strictness and max_pixels are d's settings'.
 * *pixels (height x width x channels bytes, rows packed) is d's: valid
 * until d's next call or its close. *src_width, *src_height (may be
 * NULL): the image's own size. Returns 0, or GF_EINVAL or a sample error
 * code (GF_ETRUNC, GF_EFORMAT, ...) with the reason in why. */
GF_API int gf_decoder_decode_fit(gf_decoder *d, const void *data, size_t len, int max_side,
                                 const uint8_t **pixels, int *width, int *height,
                                 int *src_width, int *src_height, char *why, size_t why_len);

/* Frees d and sets *d = NULL; NULL is a no-op. */
GF_API void gf_decoder_close(gf_decoder **d);

/* A segmentation mask resized whole, for tools (gpufeed prepare): png[0,
 * len) a PNG of class ids (8-bit grey, or palette of 1 to 8 bits: its
 * indices, never its colours) of width x height, its image's stored size
 * (another size is refused naming both), resized to out_w x out_h by
 * nearest neighbour as PIL's Image.resize((out_w, out_h), Image.NEAREST)
 * does, so every value written is one of the mask's; out: out_h rows of
 * out_w bytes. The loader's rule for a mask field (settings.fields).
 * Returns 0, or with why: GF_EFORMAT (not such a PNG; a build without
 * libspng), GF_ECORRUPT (damaged or cut short, another size), GF_ENOMEM,
 * GF_EINVAL (a size below 1, a NULL pointer). Any thread. */
GF_API int gf_mask_resize(const void *png, size_t len, int width, int height, int out_w,
                          int out_h, uint8_t *out, char *why, size_t why_len);

/* Frees memory the library handed to the caller (gf_read_sample's *data);
 * NULL is a no-op. Any thread. */
GF_API void gf_free(void *p);

/* One-shot gf_decoder_open + decode + close. Thread-safe. GF_EINVAL with
 * why naming the setting when s fails gf_open's checks (all but data). */
GF_API int gf_decode_image(const gf_settings *s, const void *data, size_t len,
                           uint64_t epoch, uint64_t index, uint8_t *out,
                           char *why, size_t why_len);

/* ---- Verify --------------------------------------------------------------
 * Decodes every sample of a data set and lists what cannot be used: what
 * `gpufeed verify` and gpufeed.verify() run. From settings it reads data,
 * threads, io, queue_depth, decoder, strictness, extensions, max_pixels,
 * max_file_bytes, read_budget_bytes, on_shard_error, rank and world (world
 * 0: the whole data set, not a launcher's share), channels and fields
 * (each declared field of every sample is checked as the loader takes it:
 * text is UTF-8, an array has the field's dtype and shape, a mask is an
 * 8-bit PNG of its image's size, boxes are finite; a field's failure
 * names its member, "shard.tar:key.latent.npy"); the
 * rest it sets itself: one unshuffled epoch, the eval transform at 32x32,
 * batches of 64, on_error skip, on the CPU (never a device ring), its own
 * on_sample_error and on_sample_warning. An epoch in which every sample
 * is bad (gf_next's GF_EDATASET with no batch delivered) ends the list:
 * every sample is listed, and it is not an error. Blocks the calling
 * thread; any thread. */
typedef struct gf_verify_entry {
    int64_t sample;     /* data set index; -1 for a damaged shard or a
                           key without a field's member */
    int code;           /* GF_E* */
    char *path;         /* as on_sample_error names it (relative to the
                           data set's root; "train-000003.tar:key.jpg";
                           a damaged shard's path as given), whole */
    char *reason;
} gf_verify_entry;

typedef struct gf_verify_result {
    uint64_t samples;   /* checked: the share's samples in the epoch, and
                           the shards' keys without a member of a field
                           beyond image and label (settings.fields) */
    uint64_t bad;       /* of them, bad (stats.errors, and those keys) */
    gf_verify_entry *bad_samples;     /* in sampler order, then those keys
                                         (sample -1, GF_EDATASET, path
                                         the missing member, as
                                         gf_skipped_entry names it) */
    size_t n_bad_samples;
    gf_verify_entry *warned_samples;  /* LENIENT: decoded although the
                                         decoder warned, as decodes finish */
    size_t n_warned_samples;
    gf_verify_entry *damaged_shards;  /* taken in part (on_shard_error
                                         SKIP), in source order */
    size_t n_damaged_shards;
    int opened;         /* 1: the loader opened and stats are its figures */
    int incomplete;     /* memory ran out: n_bad_samples < bad */
    gf_stats stats;     /* the loader's at the end: what indexing left
                           out, decoders, shards (zero unless opened) */
    char error[512];    /* why it failed, or why no shard kept a sample:
                           the loader's message ("" if it gave none) */
    gf_verify_entry *skipped_entries; /* ImageFolder: what the walk left out
                                         by name (gf_skipped_entry; sample
                                         -1, code 0), the first
                                         GF_SKIPPED_NAMED_MAX */
    size_t n_skipped_entries;
    uint64_t skipped_entries_total; /* all of them, named or not */
} gf_verify_result;

/* Returns 0 with the lists in *out, also when every shard was damaged and
 * none kept a sample (opened 0, damaged_shards listed, error says why); or
 * GF_EINVAL, GF_EDATASET, GF_ENOMEM, GF_ETHREAD, ... with error naming the
 * file and the reason. *out is set either way (unless it could not be
 * allocated: GF_ENOMEM and NULL): free it with gf_verify_free(). The
 * library allocates the result, so fields may be added at its end. */
GF_API int gf_verify(const gf_settings *s, gf_verify_result **out);
/* gf_verify that stops early once *cancel is nonzero (set from another
 * thread, e.g. by a caller that took Ctrl-C; read with acquire ordering
 * between batches, every 50 ms at most, and once gf_open returns): then
 * GF_EAGAIN, error "cancelled", partial lists. cancel NULL: gf_verify. */
GF_API int gf_verify_cancellable(const gf_settings *s, gf_verify_result **out,
                                 const int *cancel);
/* Frees *r and everything it points to, sets *r = NULL; NULL is a no-op. */
GF_API void gf_verify_free(gf_verify_result **r);

/* ---- The index alone ----------------------------------------------------
 * A data set's index without a loader: what the loader would deliver,
 * before any thread, ring or device exists (verify's and bench's
 * sampling, a trainer's own synchronous loop). It indexes settings.data
 * exactly as gf_open() does (same sources, same order, same labels and
 * paths) but the WHOLE data set: rank and world are ignored, so index i
 * here is index i of gf_sample_path()/gf_read_sample() on any rank. The
 * settings are checked as gf_open checks them; only data, extensions,
 * max_file_bytes, on_shard_error, on_error and on_sample_warning are used
 * (on_error and on_sample_warning for a shard key whose .cls is no label,
 * as gf_open: a warning at open on the calling thread, or under FAIL
 * GF_EDATASET naming the shard and the member), and for remote shards
 * ca_file, remote_stall_s, remote_retries and remote_deadline_s (the
 * sidecars' requests, gf_index_read's). Read-only after
 * open: every call but gf_index_read() and gf_index_close() may be made
 * from several threads at once. */
typedef struct gf_index gf_index;

/* Returns 0, or GF_EINVAL (s, s->data or a setting), GF_EDATASET (the message
 * names the file and the reason, as gf_open's does), GF_ENOMEM. *out is
 * set even on failure (unless the handle itself could not be allocated)
 * so gf_index_last_error() can say why: gf_index_close() it either way. */
GF_API int gf_index_open(gf_index **out, const gf_settings *s);
/* Samples in the data set; 0 for NULL. */
GF_API uint64_t gf_index_count(const gf_index *ix);
/* Classes, as gf_stats.classes: an ImageFolder's sub-folders, else the
 * largest label + 1. */
GF_API int gf_index_classes(const gf_index *ix);
/* Tar shards in the source; 0 for a folder or a list file. */
GF_API uint32_t gf_index_shards(const gf_index *ix);
/* Shard k's path as the source pattern expanded it (relative to the
 * current directory at open), or NULL when k >= gf_index_shards(ix).
 * Valid until close. */
GF_API const char *gf_index_shard_path(const gf_index *ix, uint32_t k);
/* As gf_damaged_shards(): on_shard_error and on_error are read too, and a
 * damaged shard under SKIP is left out as gf_open leaves it out. */
GF_API int gf_index_damaged_shards(const gf_index *ix, gf_sample_error *out, int max);
/* As gf_skipped_entry(): what an ImageFolder walk left out by name. */
GF_API uint64_t gf_index_skipped_entry(const gf_index *ix, uint64_t i, const char **path,
                                       const char **reason);
/* As gf_sample_path(): NULL if i is out of range. Valid until close. */
GF_API const char *gf_index_path(const gf_index *ix, uint64_t i);
/* As gf_sample_label(): GF_EINVAL if i is out of range. */
GF_API int32_t gf_index_label(const gf_index *ix, uint64_t i);
/* As gf_read_sample(), codes and why included; free *data with gf_free().
 * Not thread-safe on one handle (it records the failure for
 * gf_index_last_error()). */
GF_API int gf_index_read(gf_index *ix, uint64_t i, void **data, size_t *len, char *why,
                         size_t why_len);
/* Local tar shards indexed under settings.fields: the fields beyond the
 * image and the label (text, bytes, array, mask, boxes), numbered k = 0 ..
 * gf_index_fields(ix) - 1 in settings.fields' order; 0 without any. */
GF_API int gf_index_fields(const gf_index *ix);
/* Field k's name as settings.fields names it ("seg.png", "txt;json"), and
 * its kind in *kind (may be NULL); NULL when k is out of range. Valid
 * until close. */
GF_API const char *gf_index_field_name(const gf_index *ix, int k, gf_field_kind *kind);
/* gf_index_read with the sample's fields (gpufeed prepare): *data (free
 * with gf_free) is what one read of the sample gives, every member's
 * header checked as the loader checks it: for a tar shard its members as
 * they lie there, headers and padding between; for a folder or list file,
 * the file. at[0], size[0]: where the image's bytes are in it; at[1 + k],
 * size[1 + k], ext[1 + k]: field k's member and its extension as the
 * shard spells it ("seg.png", "Latent.npy"; valid until close); ext[0]:
 * the image's ("" for a folder or list file). n: the arrays' room, at
 * least 1 + gf_index_fields(ix) (else GF_EINVAL). Codes and why as
 * gf_index_read's. Not thread-safe on one handle. */
GF_API int gf_index_read_fields(gf_index *ix, uint64_t i, void **data, size_t *len, size_t *at,
                                size_t *size, const char **ext, int n, char *why,
                                size_t why_len);
/* The last failure's message, "" if none (never NULL). */
GF_API const char *gf_index_last_error(const gf_index *ix);
/* Frees ix and sets *ix = NULL; NULL is a no-op. */
GF_API void gf_index_close(gf_index **ix);

/* ---- Index sidecars of tar shards (gpufeed index) ----
 *
 * SHARD.idx beside SHARD.tar lets gf_open index a remote shard without
 * reading it, and gives a local shard's member CRCs (its headers are read
 * all the same; a sidecar that does not list exactly the samples they
 * give is ignored with a warning). Its text is NVIDIA DALI's wds2idx
 * v1.2 (DALI's readers.webdataset reads it as index_paths), with
 * gpufeed's tokens after the sample count on the first line, which DALI
 * ignores:
 * "shard_bytes=B" (the shard's size) and "labels=L1,...,LN" (each line's
 * .cls label, in line order). Any thread; no loader needed. */

/* The shard paths (or remote shard URLs, unchanged but for the
 * expansion) a tar shard source names (brace ranges, comma lists:
 * settings.data's forms), in source order: *paths holds *n NUL-terminated
 * names one after another; free it with gf_free(). Returns 0, GF_EINVAL
 * (NULL arguments, or src is not tar shards: why says so), GF_EDATASET
 * (a bad pattern, why says which) or GF_ENOMEM. Nothing is opened. */
GF_API int gf_shard_paths(const char *src, char **paths, size_t *n, char *why, size_t why_len);

typedef struct gf_shard_index_info {
    uint64_t samples;         /* lines: keys the schema takes (opts.fields;
                                 by default one image and one .cls) */
    uint64_t members;         /* members the scan saw */
    uint64_t shard_bytes;     /* the shard's size, recorded as shard_bytes= */
    uint64_t skipped_keys;    /* keys and members a scan skips, as gf_stats */
    uint64_t skipped_members; /* counts them (not in the text) */
} gf_shard_index_info;

/* The index sidecar text of the tar shard at path shard (relative to the
 * current directory), or at an http://, https:// or s3:// URL (as
 * gf_shard_index_with with opts NULL: the system's CA bundle), from its
 * headers (never from a sidecar beside it):
 * one line per sample gf_open takes from it, each with every member of
 * its key the scan kept, so gf_open reading it gets the same samples and
 * labels as a scan. *text (*len bytes, NUL-terminated) is the caller's:
 * free it with gf_free(); info may be NULL. Returns 0, GF_EINVAL (NULL
 * arguments), GF_EIO (it cannot be opened or is not a regular file),
 * GF_EDATASET (a damaged shard, no sample, or a member name the format
 * cannot hold: why = "SHARD: offset N: reason") or GF_ENOMEM. */
GF_API int gf_shard_index(const char *shard, char **text, size_t *len,
                          gf_shard_index_info *info, char *why, size_t why_len);

/* What gf_shard_index_with may be told beyond the shard; all zero (or
 * opts NULL) is every default. A field added later takes its bytes from
 * reserved, which must be zero. */
typedef struct gf_shard_index_opts {
    const char *ca_file;    /* https: a PEM CA bundle trusted instead of the
                               system's (as settings.ca_file); NULL = the
                               system's. Ignored for a local shard */
    /* A remote shard's requests obey its remote_stall_s, remote_retries
     * and remote_deadline_s (no other field is read; GF_EINVAL if one is
     * out of range); NULL = their defaults. */
    const gf_settings *remote_settings;
    /* The sample schema the scan keeps keys by, settings.fields' spec
     * ("latent.npy,cls": a set without images); NULL or "": an image and
     * its .cls. Index with the fields the loader will open the set with:
     * a line lists every member of its key all the same, but only the
     * keys this schema takes get one. Without an image field a line's
     * member_crc32c= is its image member's, else its first member other
     * than the .cls (the loader's sample member when that is the schema's
     * first field); without a label field every labels= value is 0, the
     * loader's label for such a schema, and the lines leave the keys'
     * .cls members out, so a loader with a label field finds no sample in
     * them (a remote open fails, a local one reads the headers) rather
     * than zeros for labels. GF_EINVAL if the loader would refuse the
     * spec (why = "fields: ..."). */
    const char *fields;
    uint8_t reserved[40];   /* zero */
} gf_shard_index_opts;      /* 64 bytes */

/* As gf_shard_index, with opts; the one call for remote shards that need
 * one. A remote shard (http://, https://, s3://; one URL, not a pattern:
 * gf_shard_paths expands those) is fetched whole with ranged GETs into an
 * anonymous memory file on this thread, one shard's bytes at a time
 * (plus 128 MiB of transfers), and scanned there as a local one is: the
 * same text, shard_bytes= the object's size. s3:// signs with the
 * credentials, region and endpoint gf_open would use (AWS_* variables,
 * ~/.aws; AWS_ENDPOINT_URL_S3 for another server). Messages name the URL
 * as shown (never userinfo or a secret) and, when a server answered, the
 * HTTP status. Returns as gf_shard_index, and GF_EINVAL (a bad URL, a
 * pattern of more than one shard, no credentials for s3://, a build
 * without the `remote` feature, reserved not zero), GF_EIO (the object
 * could not be fetched, or changed while it was: why says which). */
GF_API int gf_shard_index_with(const char *shard, const gf_shard_index_opts *opts, char **text,
                               size_t *len, gf_shard_index_info *info, char *why,
                               size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* GPUFEED_H */
