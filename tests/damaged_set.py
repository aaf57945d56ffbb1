#!/usr/bin/env python3
"""Makes an ImageFolder with one good and one damaged file of each class
issue 14 names, and checks `gpufeed verify --json` on it in each
strictness: every damaged file listed exactly once, with the expected
error, every good file not listed.

    damaged_set.py make DIR GOOD.jpg GOOD.png [GOOD.webp]
    damaged_set.py check DIR MODE VERIFY.json [--turbo] [--spng] [--webp]
    damaged_set.py table DIR WHOLE.json STRICT.json LENIENT.json

`make` damages copies of the good files make-dataset wrote (JPEG, PNG,
WebP) and writes GIF, BMP, TGA, PNM and PSD files itself (good and
damaged), a FIFO, a directory named like an image and a TIFF. `check`
exits 1 naming what differs. `table` prints the classes x modes outcomes
as a Markdown table. Python's standard library only.
"""
import json
import os
import struct
import sys
import zlib

W, H = 6, 5


def pixels(seed):
    return bytes((x * 37 + y * 11 + c * 5 + seed * 13) & 255
                 for y in range(H) for x in range(W) for c in range(3))


def gif(frame_w=W, frame_h=H, trailer=True):
    """A GIF of 4 gray levels: LZW with a clear code before every pixel
    keeps the code size at 3 bits, so no dictionary is needed."""
    pal = bytes(v for i in range(4) for v in (i * 80,) * 3)
    codes, bits = [], 3
    for i in range(frame_w * frame_h):
        codes += [4, i % 4]            # clear, pixel
    codes.append(5)                    # end of information
    acc = n = 0
    data = bytearray()
    for c in codes:
        acc |= c << n
        n += bits
        while n >= 8:
            data.append(acc & 255)
            acc >>= 8
            n -= 8
    if n:
        data.append(acc)
    sub = b"".join(bytes([len(data[i:i + 255])]) + bytes(data[i:i + 255])
                   for i in range(0, len(data), 255)) + b"\0"
    out = (b"GIF89a" + struct.pack("<HHBBB", W, H, 0x81, 0, 0) + pal +
           b"\x2c" + struct.pack("<HHHHB", 0, 0, frame_w, frame_h, 0) + b"\x02" + sub)
    return out + (b"\x3b" if trailer else b"")


def bmp(colours_used=None):
    """24-bit BMP; with colours_used, an 8-bit one claiming that many."""
    if colours_used is None:
        stride = (W * 3 + 3) & ~3
        rows = b"".join(pixels(1)[y * W * 3:(y + 1) * W * 3] + b"\0" * (stride - W * 3)
                        for y in range(H))
        bpp, pal, ncol = 24, b"", 0
    else:
        stride = (W + 3) & ~3
        rows = bytes(stride * H)
        bpp, pal, ncol = 8, bytes(4 * 256), colours_used
    off = 14 + 40 + len(pal)
    head = b"BM" + struct.pack("<IHHI", off + len(rows), 0, 0, off)
    info = struct.pack("<IiiHHIIiiII", 40, W, H, 1, bpp, 0, len(rows), 2835, 2835, ncol, 0)
    return head + info + pal + rows


def tga(with_pixels=True):
    head = struct.pack("<BBBHHBHHHHBB", 0, 0, 2, 0, 0, 0, 0, 0, W, H, 24, 0)
    return head + (pixels(2) if with_pixels else b"")


def ppm(maxval=b"255"):
    return b"P6\n%d %d\n" % (W, H) + maxval + b"\n" + pixels(3)


def psd():
    head = b"8BPS" + struct.pack(">H6xHIIHH", 1, 3, H, W, 8, 3)
    planes = b"".join(bytes(pixels(4)[c::3]) for c in range(3))
    return head + struct.pack(">III", 0, 0, 0) + struct.pack(">H", 0) + planes


def png_chunks(data):
    pos, out = 8, []
    while pos + 8 <= len(data):
        n, = struct.unpack(">I", data[pos:pos + 4])
        out.append((data[pos + 4:pos + 8], pos, n))
        pos += 12 + n
    return out


def png_fix_crc(data, pos):
    n, = struct.unpack(">I", data[pos:pos + 4])
    crc = zlib.crc32(bytes(data[pos + 4:pos + 8 + n]))
    data[pos + 8 + n:pos + 12 + n] = struct.pack(">I", crc)


def jpeg_scan_start(data):
    i = 2
    while i + 4 <= len(data):
        m, n = data[i + 1], struct.unpack(">H", data[i + 2:i + 4])[0]
        if m == 0xda:
            return i + 2 + n
        i += 2 + n
    raise SystemExit("no SOS in the JPEG")


# name -> (whole, strict, lenient, a word of the reason). "WARN": decoded
# and listed in warned_samples; "OK": decoded, listed nowhere. verify's
# strict and lenient decode its 32x32 eval crop, which stops above the last
# row: STRICT then checks every PNG CRC but not the Adler-32 (only a decode
# that reaches the last row reads it), LENIENT neither the IDAT CRC nor
# the Adler-32 there (as PIL).
def expectations(turbo, spng, webp):
    e = {
        "jpeg_cut.jpg": ("GF_ETRUNC",) * 3 + ("truncated",),
        "png_ihdr_crc.png": ("GF_ECORRUPT",) * 3 + ("IHDR",),
        "png_idat_crc.png": ("GF_ECORRUPT", "GF_ECORRUPT", "OK" if spng else "WARN", "IDAT"),
        "png_deflate.png": ("GF_ECORRUPT",) * 3 + ("deflate" if spng else "PNG",),
        "png_cut.png": ("GF_ETRUNC",) * 3 + ("truncated",),
        "gif_cut.gif": ("GF_ETRUNC",) * 3 + ("GIF",),
        "gif_no_trailer.gif": ("GF_ETRUNC", "GF_ETRUNC", "WARN", "trailer"),
        "gif_0x0.gif": ("GF_ECORRUPT",) * 3 + ("0x0",),
        "bmp_cut.bmp": ("GF_ETRUNC",) * 3 + ("BMP",),
        "bmp_palette.bmp": ("GF_ECORRUPT",) * 3 + ("palette",),
        "tga_no_pixels.tga": ("GF_ETRUNC",) * 3 + ("pixel bytes",),
        "pnm_maxval_0.ppm": ("GF_ECORRUPT",) * 3 + ("maxval 0",),
        "pnm_garbage.ppm": ("GF_ECORRUPT",) * 3 + ("garbage",),
        "pnm_cut.ppm": ("GF_ETRUNC",) * 3 + ("PNM",),
        "psd_cut.psd": ("GF_ETRUNC",) * 3 + ("PSD",),
        "fifo.jpg": ("GF_EIO",) * 3 + ("FIFO",),
        "dir.png": ("GF_EIO",) * 3 + ("directory",),
        "scan.tif": ("GF_EFORMAT",) * 3 + ("TIFF",),
    }
    if turbo:
        e["jpeg_scan.jpg"] = ("GF_ECORRUPT", "GF_ECORRUPT", "WARN", "corrupt JPEG data")
    else:  # stb_image stops at the stray marker
        e["jpeg_scan.jpg"] = ("GF_ECORRUPT",) * 3 + ("unknown marker",)
    if spng:
        e["png_adler.png"] = ("GF_ECORRUPT", "OK", "OK", "Adler-32")
    e["webp_cut.webp"] = (("GF_ETRUNC",) * 3 + ("truncated",) if webp
                          else ("GF_EFORMAT",) * 3 + ("no WebP decoder",))
    return e


GOOD = ["good.jpg", "good.png", "good.gif", "good.bmp", "good.tga", "good.ppm", "good.psd"]


def make(root, jpg, png, webp=None):
    d = os.path.join(root, "class_00")
    os.makedirs(d)

    def put(name, data):
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)

    j = open(jpg, "rb").read()
    p = bytearray(open(png, "rb").read())
    put("good.jpg", j)
    put("good.png", bytes(p))
    s0 = jpeg_scan_start(j)
    bad = bytearray(j)
    bad[s0 + (len(j) - s0) // 2:s0 + (len(j) - s0) // 2 + 2] = b"\xff\xd3"  # a stray RST
    put("jpeg_scan.jpg", bytes(bad))
    put("jpeg_cut.jpg", j[:len(j) // 2])

    chunks = png_chunks(p)
    ihdr = next(c for c in chunks if c[0] == b"IHDR")
    idats = [c for c in chunks if c[0] == b"IDAT"]
    b = bytearray(p)
    b[ihdr[1] + 8 + ihdr[2]:ihdr[1] + 12 + ihdr[2]] = b"\0\0\0\0"
    put("png_ihdr_crc.png", bytes(b))
    b = bytearray(p)
    last = idats[-1]
    b[last[1] + 8 + last[2]] ^= 0x55
    put("png_idat_crc.png", bytes(b))
    b = bytearray(p)
    first = idats[0]
    b[first[1] + 10] |= 0x06           # the first deflate block: reserved type 3
    png_fix_crc(b, first[1])
    put("png_deflate.png", bytes(b))
    b = bytearray(p)
    b[last[1] + 8 + last[2] - 1] ^= 0x01  # the Adler-32's last byte
    png_fix_crc(b, last[1])
    put("png_adler.png", bytes(b))
    put("png_cut.png", bytes(p[:len(p) // 2]))

    if webp:
        w = open(webp, "rb").read()
        put("good.webp", w)
        put("webp_cut.webp", w[:len(w) // 2])
    else:  # a RIFF/WEBP header is enough to be sniffed as WebP
        put("webp_cut.webp", b"RIFF\x20\0\0\0WEBPVP8 " + bytes(20))

    g = gif()
    put("good.gif", g)
    put("gif_cut.gif", g[:len(g) // 2])
    put("gif_no_trailer.gif", gif(trailer=False))
    put("gif_0x0.gif", gif(0, 0))
    bm = bmp()
    put("good.bmp", bm)
    put("bmp_cut.bmp", bm[:len(bm) - 20])
    put("bmp_palette.bmp", bmp(colours_used=1 << 31))
    put("good.tga", tga())
    put("tga_no_pixels.tga", tga(with_pixels=False))
    pm = ppm()
    put("good.ppm", pm)
    put("pnm_maxval_0.ppm", ppm(b"0"))
    put("pnm_garbage.ppm", ppm(b"255xxx"))
    put("pnm_cut.ppm", pm[:len(pm) - 7])
    ps = psd()
    put("good.psd", ps)
    put("psd_cut.psd", ps[:len(ps) - 9])
    put("scan.tif", b"II*\0" + bytes(60))
    os.mkfifo(os.path.join(d, "fifo.jpg"))
    os.mkdir(os.path.join(d, "dir.png"))


MODES = {"whole": 0, "strict": 1, "lenient": 2}


def listed(report, key):
    out = {}
    for s in report[key]:
        name = os.path.basename(s["path"])
        out.setdefault(name, []).append(s)
    return out


def check(root, mode, path, turbo, spng, webp):
    report = json.load(open(path))
    exp = expectations(turbo, spng, webp)
    bad, warned = listed(report, "bad_samples"), listed(report, "warned_samples")
    errors = []
    for name, e in sorted(exp.items()):
        want, word = e[MODES[mode]], e[3]
        if want == "OK":
            if bad.get(name) or warned.get(name):
                errors.append(f"{name}: listed, want decoded silently in {mode}")
            continue
        where, other = (warned, bad) if want == "WARN" else (bad, warned)
        got = where.get(name, [])
        if len(got) != 1 or other.get(name):
            errors.append(f"{name}: listed {len(got)} times in the expected list, "
                          f"{len(other.get(name, []))} in the other; want once, {want}")
            continue
        code = got[0]["error"]
        if want != "WARN" and code != want or word not in got[0]["reason"]:
            errors.append(f"{name}: {code} '{got[0]['reason']}', want {want} naming '{word}'")
    for name in sorted(set(bad) | set(warned)):
        if name not in exp:
            errors.append(f"{name}: listed but not damaged: {bad.get(name) or warned.get(name)}")
    n_bad = sum(1 for e in exp.values() if e[MODES[mode]] not in ("WARN", "OK"))
    if report["bad"] != n_bad or report["strictness"] != mode:
        errors.append(f"bad {report['bad']} (want {n_bad}), strictness {report['strictness']}")
    if errors:
        print(f"damaged_set {mode}:\n  " + "\n  ".join(errors))
        return 1
    print(f"damaged_set {mode}: {len(exp)} damaged files, each listed once or not at all "
          f"as expected; {report['samples'] - len(exp)} good")
    return 0


def table(root, *paths):
    reports = [json.load(open(p)) for p in paths]
    rows = {}
    for col, r in enumerate(reports):
        for key, tag in (("bad_samples", ""), ("warned_samples", "warning: ")):
            for s in r[key]:
                name = os.path.basename(s["path"])
                rows.setdefault(name, ["decodes"] * len(reports))
                rows[name][col] = f"{tag}`{s['error']}` {s['reason']}"
    print("| file | " + " | ".join(r["strictness"] for r in reports) + " |")
    print("|---" * (len(reports) + 1) + "|")
    for name in sorted(rows):
        print(f"| {name} | " + " | ".join(c.replace("|", "/") for c in rows[name]) + " |")
    return 0


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[:1] == ["make"]:
        make(*a[1:])
    elif a[:1] == ["check"]:
        flags = {f for f in a[4:]}
        sys.exit(check(a[1], a[2], a[3], "--turbo" in flags, "--spng" in flags, "--webp" in flags))
    elif a[:1] == ["table"]:
        sys.exit(table(*a[1:]))
    else:
        sys.exit(__doc__)
