#!/usr/bin/env python3
"""Writes scripts/link-order.txt: the functions a release build of folio runs, for lld to lay side by side.

    python3 scripts/make-link-order.py [--work DIR]

Why: the kernel maps the 64 KiB around every page of code a process touches (fault-around), and counts all of it
in the process's memory. A no-change WebDAV run executes about 1 MB of folio's 20 MB of code, spread over the
whole binary: 10.5 MiB of it ended up mapped. Listed first, in their own sections (`make release` compiles with
-function-sections), those functions sit together and a run maps a few MiB.

What it does:
  1. `make release`, asking lld for its map (which input section holds which function);
  2. starts the benchmark's servers on 127.0.0.1 (Benchmarks/run.py: sshd, an SFTP-only sshd, nginx WebDAV) and
     its 1,000-file tree;
  3. runs folio under valgrind's callgrind: a first mirror, a no-change run and an incremental run from a local
     folder, SFTP, SFTP-only and WebDAV; `sync --now` from a configuration; `status`;
  4. lists every function of folio's own binary that ran: those every kind of run uses first, then grouped by
     the kinds of run that use them.

A function the compiler put in a section shared with others (`.text` of an object built without
-function-sections: CoreFoundation, libdispatch, part of the Swift runtime) moves with that whole section, so
those from shared sections over 16 KiB come last: among the others they would spread the used code apart with
their sections' unused code; together after it, what a run uses of them is still near. Measured on a 100,000-file
WebDAV no-change run: left out, 5.4 MiB of code mapped in one build and 6.6 in another, depending on where the
linker happened to put them; last, 6.2. Run it again when the code has changed much; names that are gone are skipped by the linker, so a stale
list costs memory, never correctness.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "Benchmarks"))
import run as bench  # noqa: E402  (the benchmark's servers and trees)

ORDER_FILE = os.path.join(HERE, "link-order.txt")
# A shared section larger than this goes after the used code, not among it.
LARGEST_SHARED_SECTION = 16 * 1024


def shared_sections(map_path):
    """{symbol: size of the plain `.text` section holding it} from an lld map (-Map)."""
    holder = {}
    section_size = None
    line_re = re.compile(r"\s*[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+(\d+)\s+(\S.*)$")
    with open(map_path) as lines:
        for line in lines:
            match = line_re.match(line)
            if not match:
                continue
            name = match.group(3).strip()
            if ":(" in name and name.endswith(")"):  # an input section: "file.o:(.text.name)"
                section_size = int(match.group(1), 16) if name.endswith(":(.text)") else None
            elif section_size is not None and match.group(2) == "1":  # a symbol inside the section above
                holder[name] = section_size
    return holder


def functions_run(callgrind_out, binary_name):
    """The names of the functions of `binary_name` (not of the shared libraries) a callgrind profile saw run."""
    names, in_binary = set(), False
    with open(callgrind_out, errors="replace") as lines:
        for line in lines:
            if line.startswith("ob="):
                in_binary = line[3:].strip().endswith("/" + binary_name)
            elif line.startswith("fn=") and in_binary:
                names.add(line[3:].strip().split("'")[0])  # "name'2": callgrind's mark for a recursion level
    return names


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", default="/tmp/folio-link-order", help="servers, trees and profiles (default %(default)s)")
    args = parser.parse_args()
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    if shutil.which("valgrind") is None:
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "valgrind"], check=True)

    map_path = os.path.join(work, "folio.map")
    bench.log("building folio (make release, with lld's map)")
    subprocess.run(["make", "-s", "release", f"RELEASE_EXTRA=-Xlinker -Map={map_path}"], cwd=REPO, check=True)
    # valgrind 3.19 cannot read the DWARF 5 that Swift 6 writes; the symbols are all callgrind needs.
    binary = os.path.join(work, "folio")
    subprocess.run(["strip", "--strip-debug", "-o", binary, os.path.join(REPO, ".build", "release", "folio")], check=True)

    tree = bench.Tree(work, "small", 0.05)
    tree.prepare()
    processes = bench.Processes()
    profiles = []
    try:
        servers = bench.Servers(work, processes, os.path.join(work, "src"))
        servers.start_sshd()
        servers.start_sshd(sftp_only=True)
        servers.write_known_hosts()
        servers.start_nginx()
        ctx = bench.Context(argparse.Namespace(), work, binary, servers)

        def profiled(kind, name, argv, env):
            out = os.path.join(work, "profiles", name + ".out")
            os.makedirs(os.path.dirname(out), exist_ok=True)
            result = subprocess.run(["valgrind", "--tool=callgrind", "--demangle=no", "--compress-strings=no",
                                     f"--callgrind-out-file={out}"] + argv, env=dict(os.environ, **env),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if result.returncode != 0:
                raise SystemExit(f"make-link-order: {name} failed (exit {result.returncode}): {result.stderr[-2000:]}")
            profiles.append((kind, out))
            bench.log(f"  {name}")

        for source in ("local", "sftp", "sftp-only", "webdav"):
            dest = os.path.join(work, "dest", source)
            shutil.rmtree(dest, ignore_errors=True)
            shutil.rmtree(dest + ".state", ignore_errors=True)
            for scenario in ("initial", "no-change", "incremental"):
                tree.use("changed" if scenario == "incremental" else "base")
                argv, env = bench.tool_command("folio", source, tree, dest, ctx, scenario)
                profiled(source, f"{source}-{scenario}", argv, env)
            tree.use("base")

        config = os.path.join(work, "folio.toml")
        state = os.path.join(work, "config.state")
        for folder in (state, os.path.join(work, "dest", "config-local"), os.path.join(work, "dest", "config-webdav")):
            shutil.rmtree(folder, ignore_errors=True)
        with open(config, "w") as out:
            out.write(f'[[target]]\nname = "local"\nsource = "{tree.current}"\n'
                      f'destination = "{os.path.join(work, "dest", "config-local")}"\n\n'
                      f'[[target]]\nname = "webdav"\nsource = "http://127.0.0.1:{servers.http_port}/{tree.slug}/"\n'
                      f'destination = "{os.path.join(work, "dest", "config-webdav")}"\n')
        env = {"FOLIO_STATE_DIR": state}
        for scenario in ("initial", "no-change"):
            profiled("sync", f"sync-{scenario}", [binary, "sync", "--now", "--config", config], env)
        profiled("status", "status", [binary, "status", "--config", config], env)
        profiled("status", "status-json", [binary, "status", "--json", "--config", config], env)
    finally:
        processes.stop_all()

    # Which kinds of run (a source, `sync`, `status`) use each function. Functions with the same kinds sit
    # together: a WebDAV run then maps the code every run shares and WebDAV's own, not SFTP's between them.
    kinds = collections.defaultdict(set)
    for kind, profile in profiles:
        for name in functions_run(profile, os.path.basename(binary)):
            kinds[name].add(kind)
    shared = shared_sections(map_path)
    listed = sorted(kinds, key=lambda name: (shared.get(name, 0) > LARGEST_SHARED_SECTION, -len(kinds[name]),
                                             sorted(kinds[name]), name))
    with open(ORDER_FILE, "w") as out:
        out.write("".join(name + "\n" for name in listed))
    last = sum(shared.get(name, 0) > LARGEST_SHARED_SECTION for name in listed)
    bench.log(f"wrote {ORDER_FILE}: {len(listed)} functions ({last} of them last, in shared sections over "
              f"{LARGEST_SHARED_SECTION // 1024} KiB); run `make release` to link with it")


if __name__ == "__main__":
    main()
