#!/usr/bin/env python3
"""Shards as webdataset's TarWriter writes them (Python tarfile, PAX, a
float mtime: a pax header before every member) and GNU long-name shards,
with index sidecars by the rules of DALI's tools/wds2idx.py, both
versions, re-derived here from how they compute an offset:

  2021 (v1.2): from `tar --list --block-num`, the data ends where the
    NEXT entry's reported block starts: offset = next * 512 - size,
    rounded down to 512. GNU tar reports a pax member at its own header
    (after the pax one), so on a PAX shard every offset but the last
    is 1,024 bytes too far.
  2023 (v1.2): offset = (the entry's reported block + 1) * 512. GNU tar
    reports a long-name member at its 'L' header, so on a GNU long-name
    shard every offset is the long name's data.

Also: a correct sidecar, one that leaves a sample out, and one whose image
entries point at the next key's image. Usage: wds_fixtures.py DIR; writes
DIR/CASE/s.tar + DIR/CASE/s.idx and DIR/CASE/expect (one 'label hex(image
bytes)' line per sample a correct index gives)."""
import io
import os
import sys
import tarfile
import time

N = 8


def image(i):
    return (b"IMG%03d." % i) * 16  # same size for every sample


def write_shard(path, fmt, long_names):
    keys = []
    with tarfile.open(path, "w", format=fmt) as tf:
        for i in range(N):
            key = ("d" * 96 + "/s%03d" % i) if long_names else "s%03d" % i
            keys.append(key)
            for ext, data in (("png", image(i)), ("cls", b"%d" % (i % 3))):
                ti = tarfile.TarInfo("%s.%s" % (key, ext))
                ti.size = len(data)
                ti.mtime = time.time()  # a float: TarWriter's, a pax header in PAX
                ti.mode = 0o444
                tf.addfile(ti, io.BytesIO(data))
    return keys


def entries(path):
    """(reported block, data offset, name, size) of each regular member,
    as GNU tar reports the block: a long-name member at its 'L' header, a
    pax member at its own; and the block of the end (the NULs)."""
    out = []
    with tarfile.open(path) as tf:
        for m in tf:
            first = m.offset  # tarfile: the first header, pax or 'L' included
            with open(path, "rb") as f:
                f.seek(first)
                typ = f.read(512)[156:157]
            reported = first if typ == b"L" else m.offset_data - 512
            out.append((reported // 512, m.offset_data, m.name, m.size))
        end = tf.offset // 512
    return out, end


def sidecar(path, es, offset_of, drop=None, cls_first=False):
    lines = []
    for k in range(0, len(es), 2):
        line = []
        for j in ((k + 1, k) if cls_first else (k, k + 1)):
            _, _, name, size = es[j]
            ext = name.rsplit("/", 1)[-1].split(".", 1)[1]
            line.append("%s %d %d %s" % (ext, offset_of(j), size, name))
        lines.append(" ".join(line))
    if drop is not None:
        del lines[drop]
    with open(path, "w") as f:
        f.write("v1.2 %d\n" % len(lines) + "".join(l + "\n" for l in lines))


def case(root, name, fmt, long_names, rule, drop=None):
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    shard = os.path.join(d, "s.tar")
    write_shard(shard, fmt, long_names)
    es, end = entries(shard)
    blocks = [e[0] for e in es] + [end]
    rules = {
        "right": lambda j: es[j][1],
        "2021": lambda j: (blocks[j + 1] * 512 - es[j][3]) // 512 * 512,
        "2023": lambda j: (es[j][0] + 1) * 512,
        # each key's image entry at the next key's image (same size)
        "next": lambda j: es[j + 2][1] if es[j][2].endswith(".png") and j + 2 < len(es)
        else es[j][1],
    }
    sidecar(os.path.join(d, "s.idx"), es, rules[rule], drop, cls_first=rule == "next")
    with open(os.path.join(d, "expect"), "w") as f:
        for i in range(N):
            f.write("%d %s\n" % (i % 3, image(i).hex()))


def main():
    root = sys.argv[1]
    case(root, "pax-right", tarfile.PAX_FORMAT, False, "right")
    case(root, "pax-2021", tarfile.PAX_FORMAT, False, "2021")
    case(root, "pax-2023", tarfile.PAX_FORMAT, False, "2023")
    case(root, "gnu-right", tarfile.GNU_FORMAT, True, "right")
    case(root, "gnu-2021", tarfile.GNU_FORMAT, True, "2021")
    case(root, "gnu-2023", tarfile.GNU_FORMAT, True, "2023")
    case(root, "pax-omit", tarfile.PAX_FORMAT, False, "right", drop=3)
    case(root, "pax-next", tarfile.PAX_FORMAT, False, "next", drop=N - 1)


main()
