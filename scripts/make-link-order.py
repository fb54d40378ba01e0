#!/usr/bin/env python3
"""Writes scripts/link-order.txt: the functions a release build of folio runs, for lld to lay side by side.

    python3 scripts/make-link-order.py [--work DIR]

Why: the kernel maps the 64 KiB around every page of code a process touches (fault-around), and counts all of it
in the process's memory. A no-change WebDAV run executes about 1 MB of folio's 20 MB of code, spread over the
whole binary: 10.5 MiB of it ended up mapped. Listed first, in their own sections (`make release` compiles with
-function-sections), those functions sit together and a run maps a few MiB.

What it does:
  1. `make release`, asking lld for its map (which input section holds which function, names mangled);
  2. starts the benchmark's servers on 127.0.0.1 (Benchmarks/run.py: sshd, an SFTP-only sshd, nginx WebDAV) and
     its 1,000-file tree;
  3. runs folio under valgrind's callgrind: a first mirror, a no-change run and an incremental run from a local
     folder, SFTP, SFTP-only and WebDAV; `sync --now` from a configuration; `status`;
  4. lists every function of folio's own binary that ran: those more kinds of run use first, and those the same
     kinds use together.

A function the compiler put in a section shared with others (`.text` of an object built without
-function-sections: CoreFoundation, libdispatch, part of the Swift runtime) moves with that whole section, so
those from shared sections over 16 KiB come last: among the others they would spread the used code apart with
their sections' unused code; together after it, what a run uses of them is still near. Measured on a 100,000-file
WebDAV no-change run: left out of the list, 5.5 MiB of code mapped when linked from one build's objects and 6.4
from another's (the same code), depending on where the linker happened to put those sections; last, 5.6 and 6.2.
Run it again when the code has changed much; names that are gone are skipped by the linker, so a stale list costs
memory, never correctness.
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
    """{symbol: size of the plain `.text` section holding it} from an lld map (-Map, with --no-demangle).

    lld writes four fixed-width columns (VMA, LMA, size, alignment), then the name indented by what it is: an
    output section by 0, an input section ("file.o:(.text.name)") by 8, a symbol inside it by 16."""
    holder = {}
    section_size = None
    line_re = re.compile(r"[ 0-9a-f]{16} [ 0-9a-f]{16} ([ 0-9a-f]{8}) [ 0-9]{5} ( *)(\S.*)$")
    with open(map_path) as lines:
        header = lines.readline()
        if not header.split() == ["VMA", "LMA", "Size", "Align", "Out", "In", "Symbol"]:
            raise SystemExit(f"make-link-order: {map_path} is not lld's map (the release build did not link with "
                             "lld: see the Makefile's conditions)")
        for line in lines:
            match = line_re.match(line.rstrip("\n"))
            if not match:
                continue
            indent, name = len(match.group(2)), match.group(3)
            if indent == 8:
                section_size = int(match.group(1), 16) if name.endswith(":(.text)") else None
            elif indent == 16 and section_size is not None:
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
                name = line[3:].strip().split("'")[0]  # "name'2": callgrind's mark for a recursion level
                # Not its stand-ins for code without a symbol ("0x0000…", "(below main)"): no section to move.
                if not name.startswith(("0x", "(")):
                    names.add(name)
    return names


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", default="/tmp/folio-link-order",
                        help="servers, trees and profiles (default %(default)s)")
    args = parser.parse_args()
    work = os.path.abspath(args.work)
    lock = bench.lock_work(work, "make-link-order")  # noqa: F841  (held until the script ends)
    if shutil.which("valgrind") is None:
        if os.geteuid() != 0:
            raise SystemExit("make-link-order: valgrind is missing; install it (apt-get install valgrind) "
                             "or run this as root")
        apt = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=apt)
        subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "valgrind"], check=True, env=apt)

    map_path = os.path.join(work, "folio.map")
    bench.log("building folio (make release, with lld's map)")
    subprocess.run(["make", "-s", "release", f"RELEASE_EXTRA=-Xlinker -Map={map_path} -Xlinker --no-demangle"],
                   cwd=REPO, check=True)
    # valgrind 3.19 cannot read the DWARF 5 that Swift 6 writes; the symbols are all callgrind needs.
    binary = os.path.join(work, "folio")
    subprocess.run(["strip", "--strip-debug", "-o", binary, os.path.join(REPO, ".build", "release", "folio")],
                   check=True)

    tree = bench.Tree(work, "small", 0.05)
    tree.prepare()
    processes = bench.Processes()
    profiles = []

    bench.interrupt_on_signals()
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

    # Which kinds of run (a source, `sync`, `status`) use each function: those more kinds use come first, so
    # what every run needs is together at the start, and those the same kinds use sit together after it.
    kinds = collections.defaultdict(set)
    for kind, profile in profiles:
        for name in functions_run(profile, os.path.basename(binary)):
            kinds[name].add(kind)
    sections = shared_sections(map_path)
    in_large_shared = {name for name in kinds if sections.get(name, 0) > LARGEST_SHARED_SECTION}
    listed = sorted(kinds, key=lambda name: (name in in_large_shared, -len(kinds[name]), sorted(kinds[name]), name))
    with open(ORDER_FILE, "w") as out:
        out.write("".join(name + "\n" for name in listed))
    last = len(in_large_shared)
    bench.log(f"wrote {ORDER_FILE}: {len(listed)} functions ({last} of them last, in shared sections over "
              f"{LARGEST_SHARED_SECTION // 1024} KiB); run `make release` to link with it")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt as stop:
        raise SystemExit(f"make-link-order: stopped ({stop}); the servers are stopped, the order file left as it was")
