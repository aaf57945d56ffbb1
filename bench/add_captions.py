# Copies gpufeed make-dataset's tar shards with a caption after each
# sample: KEY.txt (about 70 bytes of UTF-8) after KEY.cls, as img2dataset
# writes captions beside images. For the caption bench (bench/README.md,
# "Captions beside the images"). Usage: add_captions.py SRC_DIR DST_DIR
import glob
import io
import os
import sys
import tarfile

src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
for path in sorted(glob.glob(os.path.join(src, "train-*.tar"))):
    out = os.path.join(dst, os.path.basename(path))
    with tarfile.open(path) as s, tarfile.open(out, "w", format=tarfile.USTAR_FORMAT) as d:
        for m in s.getmembers():
            d.addfile(m, s.extractfile(m))
            key, ext = m.name.split(".", 1)
            if ext == "cls":
                text = f"a photo of sample {key}, in a synthetic set made for the bench".encode()
                info = tarfile.TarInfo(f"{key}.txt")
                info.size = len(text)
                d.addfile(info, io.BytesIO(text))
