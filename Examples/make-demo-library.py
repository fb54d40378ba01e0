#!/usr/bin/env python3
"""Generates Examples/demo-library: a small, deterministic media library for `make demo`.

Run it again to regenerate the same bytes and times (it is committed, so users need not run it).
"""
import os
import random
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "demo-library")
rng = random.Random(20261122)
base_time = 1_700_000_000

layout = {
    "Music/Nina Simone/Pastel Blues (1965)": ["01 Be My Husband.flac", "02 Nobody Knows You.flac", "03 Trouble in Mind.flac"],
    "Music/Édith Piaf/La Vie en rose": ["01 La Vie en rose.flac", "02 Padam padam.flac"],
    "Music/Various/100% Hits #1": ["01 Rock & Roll?.flac", "02 Café del Mar.flac"],
    "Photos/2024/Summer holiday": [f"IMG_{n:04d}.jpg" for n in range(1, 13)],
    "Photos/2025/Garden": [f"DSC{n:05d}.jpg" for n in range(100, 108)],
    "Documents": ["Reading list.txt", "Kiosk schedule.txt"],
    "Videos/Home movies": ["Birthday 2023.mkv"],
}

count = 0
for folder, names in layout.items():
    os.makedirs(os.path.join(root, folder), exist_ok=True)
    for name in names:
        path = os.path.join(root, folder, name)
        if name.endswith(".txt"):
            data = ("Folio demo file: " + name + "\n").encode() * rng.randint(3, 20)
        else:
            data = bytes(rng.getrandbits(8) for _ in range(rng.randint(6_000, 40_000)))
        with open(path, "wb") as handle:
            handle.write(data)
        stamp = base_time + count * 86_400 + rng.randint(0, 86_399)
        os.utime(path, ns=(stamp * 1_000_000_000, stamp * 1_000_000_000 + rng.randint(0, 999_999_999)))
        count += 1
print(f"{count} files in {root}", file=sys.stderr)
