#!/usr/bin/env python3
"""Writes a deterministic benchmark tree.

  make-tree.py small DIR   20,000 files of 1-8 KB in 400 folders
  make-tree.py media DIR   120 files of 2-8 MB (~600 MB)
  make-tree.py huge DIR    100,000 files of 0-2 KB in 2,000 folders
  make-tree.py change DIR  the incremental scenario: 1% changed (some same size), 1% added, 1% removed,
                           one folder renamed

  --scale F (before the kind) keeps the same shape with F times the files and folders (F <= 1): the
  scaled-down trees that `run.py --quick` uses for development and CI. The default is the full tree.

Names include spaces, '#', '%' and unicode. Same seed, same bytes and mtimes.
"""
import os
import random
import sys

KINDS = {
    "small": (20_000, 400, 1_024, 8_192),
    "media": (120, 12, 2 << 20, 8 << 20),
    "huge": (100_000, 2_000, 0, 2_048),
}
ODD = ["", " copy", " #2", " 100%", " café", " naïve ☃"]
BASE = 1_650_000_000


def folder_name(i):
    return f"folder {i:04d}{ODD[i % len(ODD)]}"


def file_name(i):
    return f"file-{i:06d}{ODD[(i // 7) % len(ODD)]}.dat"


def payload(rng, size):
    return rng.randbytes(size)


def write(path, data, stamp_ns):
    with open(path, "wb") as handle:
        handle.write(data)
    os.utime(path, ns=(stamp_ns, stamp_ns))


def make(kind, root, scale=1.0):
    files, folders, low, high = KINDS[kind]
    # Scaled trees keep file sizes and names; only the counts shrink (never below one folder, one file each, three files).
    folders = max(1, round(folders * scale))
    files = max(folders, 3, round(files * scale))  # the change scenario needs three files
    rng = random.Random(f"folio-{kind}")
    for f in range(folders):
        os.makedirs(os.path.join(root, folder_name(f)), exist_ok=True)
    for i in range(files):
        folder = folder_name(i % folders)
        size = rng.randint(low, high)
        stamp = (BASE + i * 37) * 1_000_000_000 + rng.randint(0, 999_999_999)
        write(os.path.join(root, folder, file_name(i)), payload(rng, size), stamp)
    for f in range(folders):
        os.utime(os.path.join(root, folder_name(f)), ns=(BASE * 1_000_000_000, BASE * 1_000_000_000))


def change(root):
    rng = random.Random("folio-change")
    paths = sorted(os.path.join(d, n) for d, _, names in os.walk(root) for n in names)
    count = max(1, len(paths) // 100)
    picked = rng.sample(paths, 3 * count)
    changed, removed = picked[:count], picked[count:2 * count]
    for index, path in enumerate(changed):
        size = os.path.getsize(path)
        # Half keep their size: only the content and mtime tell.
        data = rng.randbytes(size if index % 2 == 0 else size + 100)
        write(path, data, (BASE + 10_000_000 + index) * 1_000_000_000)
    for path in removed:
        os.unlink(path)
    folders = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    for index in range(count):
        folder = os.path.join(root, folders[index % len(folders)])
        write(os.path.join(folder, f"added-{index:05d}.dat"), rng.randbytes(rng.randint(100, 4_000)),
              (BASE + 20_000_000 + index) * 1_000_000_000)
    os.rename(os.path.join(root, folders[-1]), os.path.join(root, folders[-1] + " renamed"))


if __name__ == "__main__":
    args = sys.argv[1:]
    scale = 1.0
    if len(args) == 4 and args[0] == "--scale":
        scale = float(args[1])
        args = args[2:]
    if len(args) != 2 or args[0] not in list(KINDS) + ["change"] or not 0 < scale <= 1:
        sys.exit(__doc__)
    if args[0] == "change":
        change(args[1])
    else:
        make(args[0], args[1], scale)
