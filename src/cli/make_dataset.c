/*
 * gpufeed make-dataset: writes a synthetic ImageFolder (DIR/class_XX/
 * img_YYYYY.jpg) whose class is visible in the pixels, so a small model can
 * learn it, and whose content is photo-like, so encoded sizes and decode
 * cost are realistic (about 100 KB per 500x375 JPEG at quality 90).
 *
 * With --shards N the same images (same seed, same pixels) go into N
 * WebDataset-style ustar archives DIR/train-000000.tar ... instead: each
 * sample is two members, KEY.jpg and KEY.cls (the class index as decimal
 * text), KEY = class_XX_img_YYYYY. The samples are put in an order
 * shuffled by the seed (a seeded permutation of positions) and cut into N
 * consecutive runs, one per shard, so every shard holds a mix of classes
 * and the sizes differ by at most one.
 *
 * --format png, webp (lossy, at --quality) or webp-lossless writes the
 * same pixels as .png or .webp files (members) instead of .jpg.
 *
 * This file: the options and the usage; the image is make_dataset_image.c's,
 * the writing make_dataset_write.c's (make_dataset.h). Main thread.
 */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "make_dataset.h"

#define CMD "make-dataset"

/* ---- the command ---------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpufeed make-dataset DIR [options]\n"
            "\n"
            "Writes a synthetic ImageFolder: DIR/class_XX/img_YYYYY.jpg. Each class has\n"
            "its own hue, shape and stripe frequency (independent of --seed, so sets made\n"
            "with different seeds share classes); samples vary in pose, size, lighting,\n"
            "background, distractors and noise. Deterministic from --seed.\n"
            "\n"
            "With --shards N, the same images go into N tar shards instead,\n"
            "DIR/train-000000.tar .. DIR/train-{N-1}.tar (six digits), WebDataset\n"
            "style: per sample KEY.jpg (or .png, .webp) and KEY.cls (the class index as\n"
            "text), KEY = class_XX_img_YYYYY, in an order shuffled by --seed and\n"
            "cut into N runs of (nearly) equal size. Read them back with --data 'DIR/train-{000000..\n"
            "0000NN}.tar' (verify, bench, the library).\n"
            "\n"
            "options:\n"
            "  --classes K      classes (default 10)\n"
            "  --per-class M    images per class (default 100)\n"
            "  --size WxH       image size (default 500x375)\n"
            "  --format F       jpg|png|webp|webp-lossless (default jpg; webp: lossy at\n"
            "                   --quality; both need a build with libwebp)\n"
            "  --seed S         seed (default 0)\n"
            "  --quality Q      JPEG and lossy WebP quality 1..100 (default 90)\n"
            "  --threads N      worker threads (default: all cores)\n"
            "  --shards N       write N tar shards (1..1000000, at most one per image)\n"
            "                   instead of a folder tree\n"
            "  --force          write into a non-empty DIR (replaces same-named files)\n"
            "  -h, --help       this text\n");
}

int cli_make_dataset(const char *cmd, const char *dir, int classes, int per_class, int width,
                     int height, uint64_t seed, int threads, int quiet)
{
    md_opts o = {.dir = dir, .classes = classes, .per_class = per_class, .width = width,
                 .height = height, .format = FMT_JPG, .quality = 90, .threads = threads,
                 .seed = seed};
    return md_make(cmd, &o, quiet);
}

int cmd_make_dataset(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"classes", required_argument, NULL, 'k'},
        {"per-class", required_argument, NULL, 'm'},
        {"size", required_argument, NULL, 's'},
        {"format", required_argument, NULL, 'f'},
        {"seed", required_argument, NULL, 'S'},
        {"quality", required_argument, NULL, 'q'},
        {"threads", required_argument, NULL, 't'},
        {"force", no_argument, NULL, 'F'},
        {"shards", required_argument, NULL, 'N'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const char *const formats[] = {"jpg", "png", "webp", "webp-lossless", NULL};
    md_opts o = {.classes = 10, .per_class = 100, .width = 500, .height = 375,
                 .format = FMT_JPG, .quality = 90, .threads = 0};
    int ch;

    optind = 1;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'k': if (cli_parse_int(CMD, "classes", optarg, 1, 100000, &o.classes)) return CLI_USAGE; break;
        case 'm': if (cli_parse_int(CMD, "per-class", optarg, 1, 10000000, &o.per_class)) return CLI_USAGE; break;
        case 's': if (cli_parse_size(CMD, "size", optarg, 16384, &o.width, &o.height)) return CLI_USAGE; break;
        case 'f': if ((o.format = cli_parse_choice(CMD, "format", optarg, formats)) < 0) return CLI_USAGE; break;
        case 'S': if (cli_parse_u64(CMD, "seed", optarg, &o.seed)) return CLI_USAGE; break;
        case 'q': if (cli_parse_int(CMD, "quality", optarg, 1, 100, &o.quality)) return CLI_USAGE; break;
        case 't': if (cli_parse_int(CMD, "threads", optarg, 1, 1024, &o.threads)) return CLI_USAGE; break;
        case 'F': o.force = 1; break;
        case 'N': if (cli_parse_int(CMD, "shards", optarg, 1, SHARDS_MAX, &o.shards)) return CLI_USAGE; break;
        case 'h': usage(stdout); return CLI_OK;
        case ':': cli_error(CMD, "%s needs a value", argv[optind - 1]); return CLI_USAGE;
        default: cli_error(CMD, "unknown option '%s' (try --help)", argv[optind - 1]); return CLI_USAGE;
        }
    }
    if (optind >= argc) {
        cli_error(CMD, "missing DIR (try --help)");
        return CLI_USAGE;
    }
    if (optind < argc - 1) {
        cli_error(CMD, "one DIR expected, got also '%s'", argv[optind + 1]);
        return CLI_USAGE;
    }
    if ((o.format == FMT_WEBP || o.format == FMT_WEBP_LOSSLESS) && !GF_CLI_HAVE_WEBP) {
        cli_error(CMD, "this build has no WebP encoder (libwebp, the webp feature)");
        return CLI_USAGE;
    }
    o.dir = argv[optind];
    if ((long)o.classes * (long)o.per_class > 1000000000L) {
        cli_error(CMD, "too many images (classes x per-class > 1e9)");
        return CLI_USAGE;
    }
    if (o.width < 16 || o.height < 16) {
        cli_error(CMD, "--size: at least 16x16");
        return CLI_USAGE;
    }
    if ((long)o.shards > (long)o.classes * (long)o.per_class) {
        cli_error(CMD, "--shards %d: more shards than images (%ld): some would be empty",
                  o.shards, (long)o.classes * (long)o.per_class);
        return CLI_USAGE;
    }

    return md_make(CMD, &o, 0) < 0 ? CLI_FAIL : CLI_OK;
}
