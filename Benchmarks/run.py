#!/usr/bin/env python3
"""Folio's benchmark instrument: Folio against rclone, rsync, lftp (and tar/curl as practical limits), on the
same deterministic trees, in the same run, alternating, with every result verified.

    make bench                                  # the full matrix (see Benchmarks/README.md for the time it takes)
    make bench BENCH_ARGS="--quick"             # scaled-down trees, one repetition: development and CI smoke check
    python3 Benchmarks/run.py --help            # every option

What one invocation does:
  1. installs missing Debian packages (rclone rsync lftp openssh-server nginx + dav_ext, curl) and builds
     folio in release mode (make release);
  2. starts, on 127.0.0.1 high ports only, an sshd with its own config and keys, an nginx with WebDAV
     (dav_ext) and an access log, and one delay proxy (+10 ms each way = 20 ms RTT) in front of each;
  3. generates the trees (make-tree.py, seeded) and their changed copies (make-tree.py change);
  4. for every repetition, source and tool (alternating tools): initial mirror into an empty folder,
     no-change re-run, incremental run (the source symlink switched to the changed copy); each run is timed
     (time.monotonic around the child), its max RSS taken from wait4, requests counted (nginx access log,
     sftp-server request log, proxy round trips), and the destination verified against the source;
  5. writes results/latest.md and results/latest.json; stops every server it started, by PID.

Python 3 standard library only. Traffic only to 127.0.0.1.
"""
import argparse
import asyncio
import fcntl
import fnmatch
import hashlib
import json
import os
import platform
import re
import select
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MAKE_TREE = os.path.join(HERE, "make-tree.py")

TREES = ["small", "media", "huge"]
SOURCES = ["local", "sftp", "webdav", "sftp+rtt", "webdav+rtt", "sftp-only", "sftp-only+rtt", "webdav-h2",
           "webdav-h2+rtt"]
# The sources the targets name. "sftp-only" (an account whose every command is the SFTP server,
# ForceCommand: no find, no tar, no rsync) and "webdav-h2" (the same WebDAV tree over HTTPS with HTTP/2, as most
# web hosts serve it; lftp speaks HTTP/1.1 to it) run only when asked for, and their rows have no target.
DEFAULT_SOURCES = SOURCES[:5]
SCENARIOS = ["initial", "no-change", "incremental"]
# Mirror tools first; "tar" and "curl" are the practical limits (one stream; no listing, no comparison).
TOOLS = ["folio", "folio-t8", "rclone", "rclone-t8", "rsync", "lftp", "tar", "curl"]
# folio-t8 (folio with --transfers 8) is not run by default: it answers "would more workers help?" for the lead;
# the targets always judge folio with its defaults.
DEFAULT_TOOLS = [t for t in TOOLS if t != "folio-t8"]
MIRROR_TOOLS = {"rclone", "rclone-t8", "rsync", "lftp"}
LIMIT_TOOLS = {"tar", "curl"}
DEBIAN_PACKAGES = {  # command -> Debian package
    "rclone": "rclone", "rsync": "rsync", "lftp": "lftp", "sshd": "openssh-server", "ssh": "openssh-client",
    "nginx": "nginx", "curl": "curl", "tar": "tar", "time": "time",
}
GNU_TIME = "/usr/bin/time"
DAV_EXT_MODULE = "/usr/lib/nginx/modules/ngx_http_dav_ext_module.so"
ONE_WAY_DELAY = 0.010  # seconds each way through the delay proxy: 20 ms round trip
# --quick: about 200 small files per tree, so every row runs in a second or two. Media keeps 3 of its 12 folders
# (30 files): with fewer, the scenario's folder rename removes over half the tree and folio's max-delete guard
# rightly refuses the run.
QUICK_SCALES = {"small": 0.01, "media": 0.25, "huge": 0.002}


# ----------------------------------------------------------------------------------------------------------
# Processes we start: every one is recorded by PID and stopped at the end, on error and on Ctrl-C.
# ----------------------------------------------------------------------------------------------------------

class Processes:
    """The long-running children (servers, proxies). Stopped by PID, never by name."""

    def __init__(self):
        self.children = []  # (name, Popen)

    def start(self, name, argv, log_path, **kwargs):
        log = open(log_path, "ab")
        # A new session, so a signal to the group reaches the server's own children too.
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True, **kwargs)
        log.close()
        self.children.append((name, child))
        return child

    def stop_all(self):
        for name, child in reversed(self.children):
            if child.poll() is None:
                try:
                    os.killpg(child.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for name, child in reversed(self.children):
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
        self.children = []


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def free_port():
    """A free TCP port on 127.0.0.1 (bound then released; the servers bind it right after)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port, child, name, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise SystemExit(f"bench: {name} exited at start (code {child.returncode}); see its log")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"bench: {name} did not listen on 127.0.0.1:{port} within {timeout} s")


# ----------------------------------------------------------------------------------------------------------
# Setup: packages and the folio binary.
# ----------------------------------------------------------------------------------------------------------

def install_packages():
    """Installs the Debian packages whose commands are missing (as root; apt only)."""
    missing = sorted({pkg for cmd, pkg in DEBIAN_PACKAGES.items()
                      if not shutil.which(cmd) and not os.path.exists(f"/usr/sbin/{cmd}")})
    if not os.path.exists(DAV_EXT_MODULE):
        missing.append("libnginx-mod-http-dav-ext")
    if not missing:
        return
    if os.geteuid() != 0:
        raise SystemExit(f"bench: missing Debian packages {' '.join(missing)}; run as root or install them")
    log(f"installing {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing], check=True, env=env)
    # The packages enable system services; we start our own on high ports instead.
    for service in ("nginx", "ssh"):
        subprocess.run(["systemctl", "disable", "--now", service], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)


def build_folio(args):
    if args.folio:
        return os.path.abspath(args.folio)
    if not args.no_build:
        log("building folio (make release: swift build -c release --static-swift-stdlib, linked as the Makefile says)")
        subprocess.run(["make", "-s", "release"], cwd=REPO, check=True)
    binary = os.path.join(REPO, ".build", "release", "folio")
    if not os.path.exists(binary):
        raise SystemExit(f"bench: {binary} is missing; build it or pass --folio PATH")
    return binary


def tool_versions(folio):
    """One line per tool, for the report header."""
    def first_line(argv):
        """The first version number the tool prints about itself (e.g. 1.60.1, 9.2p1)."""
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
            found = re.search(r"\d+\.\d+(\.\d+)?(p\d+)?(-\w+)?", out.stdout + out.stderr)
            return found.group(0) if found else "?"
        except OSError:
            return "not installed"
    commit = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip()
    return {
        "folio": f"commit {commit}",
        "rclone": first_line(["rclone", "version"]),
        "rsync": first_line(["rsync", "--version"]),
        "lftp": first_line(["lftp", "--version"]),
        "openssh": first_line(["ssh", "-V"]),
        "nginx": first_line(["nginx", "-v"]),
        "curl": first_line(["curl", "--version"]),
        "tar": first_line(["tar", "--version"]),
        "python": sys.version.split()[0],
    }


def machine_description():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    distro = "?"
    try:
        with open("/etc/os-release") as release:
            distro = next(l.split("=", 1)[1].strip().strip('"') for l in release if l.startswith("PRETTY_NAME="))
    except (OSError, StopIteration):
        pass
    return f"{distro}, kernel {platform.release()}, {os.cpu_count()} × {cpu}, {memory:.0f} GiB RAM"


# ----------------------------------------------------------------------------------------------------------
# Servers: sshd, nginx WebDAV, delay proxies. All on 127.0.0.1, all with their files in the work folder.
# ----------------------------------------------------------------------------------------------------------

class Servers:
    """Starts the servers the network sources need and knows how to reach (and count) them."""

    def __init__(self, work, processes, serve_root):
        self.work = work
        self.processes = processes
        self.serve_root = serve_root  # folder holding one symlink per tree (the current source)
        self.dir = os.path.join(work, "servers")
        os.makedirs(self.dir, exist_ok=True)
        self.user_key = os.path.join(self.dir, "user_ed25519")
        self.known_hosts = os.path.join(self.dir, "known_hosts")
        self.ssh_port = self.http_port = None
        self.ssh_rtt_port = self.http_rtt_port = None
        self.https_port = self.https_rtt_port = None
        self.certificate = os.path.join(self.dir, "tls-cert.pem")  # the CA the clients trust for webdav-h2
        self.sftp_only_port = self.sftp_only_rtt_port = None
        self.sftp_log = os.path.join(self.dir, "sftp-server.log")
        self.access_log = os.path.join(self.dir, "access.log")
        self.proxy_logs = {}

    # ---- sshd ----
    def start_sshd(self, sftp_only=False):
        """The sshd of the sftp sources; with `sftp_only`, a second one whose every command is the SFTP server."""
        host_key = os.path.join(self.dir, "host_ed25519")
        for key in (host_key, self.user_key):
            if not os.path.exists(key):
                subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "folio-bench", "-f", key],
                               check=True)
        authorized = os.path.join(self.dir, "authorized_keys")
        shutil.copyfile(self.user_key + ".pub", authorized)
        os.chmod(authorized, 0o600)
        port = free_port()
        name = "sshd-sftp-only" if sftp_only else "sshd"
        config = os.path.join(self.dir, f"{name}_config")
        if sftp_only:
            self.sftp_only_port = port
        else:
            self.ssh_port = port
        with open(config, "w") as out:
            out.write(f"""# Written by Benchmarks/run.py: a private sshd for the benchmark, loopback only.
Port {port}
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile {self.dir}/{name}.pid
AuthorizedKeysFile {authorized}
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxStartups 100
MaxSessions 100
# sftp-server at DEBUG3 logs one "request N: ..." line per SFTP request, which we count (the subsystem command
# runs through the shell, so its stderr can go to our log; no syslog needed).
Subsystem sftp /usr/lib/openssh/sftp-server -e -l DEBUG3 2>>{self.sftp_log}
# Debian's bash sources ~/.bashrc for every command sshd starts (SSH_SOURCE_BASHRC) unless it believes it is a
# nested shell. This machine's root .bashrc takes a few hundred ms (pyenv init), which a server would not
# normally charge per session, so the sessions start as if nested and skip it.
SetEnv SHLVL=1
""")
            if sftp_only:
                # What an SFTP-only account gets for any command (exec included): the SFTP server, as with
                # ForceCommand internal-sftp, but the logging one, so its requests are counted as above.
                out.write(f"ForceCommand /usr/lib/openssh/sftp-server -e -l DEBUG3 2>>{self.sftp_log}\n")
        os.makedirs("/run/sshd", exist_ok=True)  # privilege separation directory sshd insists on
        child = self.processes.start(name, ["/usr/sbin/sshd", "-D", "-e", "-f", config],
                                     os.path.join(self.dir, f"{name}.log"))
        wait_for_port(port, child, name)
        public = open(host_key + ".pub").read().split()[:2]
        self.host_key_line = " ".join(public)

    def write_known_hosts(self):
        """Pins the host key for every sshd port, direct and proxied (ssh checks [host]:port entries)."""
        with open(self.known_hosts, "w") as out:
            for port in (self.ssh_port, self.ssh_rtt_port, self.sftp_only_port, self.sftp_only_rtt_port):
                if port:
                    out.write(f"[127.0.0.1]:{port} {self.host_key_line}\n")

    # ---- nginx ----
    def start_nginx(self, tls=False):
        """Plain WebDAV on http_port; with `tls`, the same on https_port over TLS offering HTTP/2 (ALPN)."""
        self.http_port = free_port()
        tls_server = ""
        if tls:
            self.https_port = free_port()
            key = os.path.join(self.dir, "tls-key.pem")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                            "-nodes", "-keyout", key, "-out", self.certificate, "-days", "30", "-subj", "/CN=127.0.0.1",
                            "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
            tls_server = f"""    server {{
        listen 127.0.0.1:{self.https_port} ssl http2;
        ssl_certificate {self.certificate};
        ssl_certificate_key {key};
        root {self.serve_root};
        location / {{
            dav_ext_methods PROPFIND OPTIONS;
            autoindex on;
        }}
    }}
"""
        conf = os.path.join(self.dir, "nginx.conf")
        temp = os.path.join(self.dir, "nginx-temp")
        os.makedirs(temp, exist_ok=True)
        with open(conf, "w") as out:
            out.write(f"""# Written by Benchmarks/run.py: a private WebDAV server for the benchmark, loopback only.
load_module {DAV_EXT_MODULE};
daemon off;
user root;
worker_processes auto;
pid {self.dir}/nginx.pid;
error_log {self.dir}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
    types {{ }}
    default_type application/octet-stream;
    sendfile on;
    keepalive_requests 100000;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    log_format bench '$request_method $status $body_bytes_sent "$request_uri"';
    access_log {self.access_log} bench;
    server {{
        listen 127.0.0.1:{self.http_port};
        root {self.serve_root};
        location / {{
            dav_ext_methods PROPFIND OPTIONS;
            autoindex on;
        }}
    }}
{tls_server}}}
""")
        child = self.processes.start("nginx", ["nginx", "-c", conf, "-e", f"{self.dir}/nginx-error.log"],
                                     os.path.join(self.dir, "nginx.out"))
        wait_for_port(self.http_port, child, "nginx")

    # ---- delay proxies ----
    def start_proxy(self, name, target_port):
        port = free_port()
        log_path = os.path.join(self.dir, f"proxy-{name}.log")
        open(log_path, "w").close()
        child = self.processes.start(f"proxy-{name}", [sys.executable, os.path.abspath(__file__), "proxy",
                                                       str(port), str(target_port), str(ONE_WAY_DELAY)], log_path)
        wait_for_port(port, child, f"delay proxy {name}")
        self.proxy_logs[name] = log_path
        return port

    # ---- counters ----
    def counters(self):
        """Offsets into the logs we count requests from, taken before a run."""
        def size(path):
            return os.path.getsize(path) if os.path.exists(path) else 0
        return {"sftp": size(self.sftp_log), "access": size(self.access_log),
                **{f"proxy-{n}": size(p) for n, p in self.proxy_logs.items()}}

    def count_since(self, source, tool, before):
        """(requests, round trips) a run made, from the logs written since `before`; None where not counted.

        rsync and tar over ssh do not use SFTP (they run a remote command), so only their round trips count."""
        kind = source_kind(source)
        requests = round_trips = None
        if kind == "webdav":
            requests = len(read_from(self.access_log, before["access"]).splitlines())
        elif kind == "sftp" and tool not in ("rsync", "tar"):
            time.sleep(0.1)  # sftp-server may still be writing its last lines after the tool exited
            # One "request N: <operation>" line per request; the server's "request N: sent ..." replies are not.
            requests = len(re.findall(r"request \d+: (?!sent )", read_from(self.sftp_log, before["sftp"])))
        if source.endswith("+rtt"):
            name = source.split("+")[0]
            round_trips = proxy_round_trips(self.proxy_logs[name], before[f"proxy-{name}"])
        return requests, round_trips


def read_from(path, offset):
    if not os.path.exists(path):
        return ""
    with open(path, "rb") as handle:
        handle.seek(offset)
        return handle.read().decode("utf-8", "replace")


def proxy_round_trips(path, offset):
    """Sums the client→server 'flights' of every connection the proxy closed since `offset`.

    A flight starts each time the client sends after the server last sent: for a request/response protocol that
    is one round trip the client waited for. Waits briefly for connections still closing after the tool exited.
    """
    deadline = time.monotonic() + 2
    while True:
        text = read_from(path, offset)
        opened = len(re.findall(r"^open ", text, re.M))
        closed = re.findall(r"^close \d+ turns=(\d+)", text, re.M)
        if len(closed) >= opened or time.monotonic() > deadline:
            return sum(int(t) for t in closed)
        time.sleep(0.05)


# ----------------------------------------------------------------------------------------------------------
# The delay proxy (run as `run.py proxy LISTEN_PORT TARGET_PORT DELAY`): adds DELAY seconds each way, keeping
# byte order and not limiting throughput (data is queued with a due time, not stop-and-wait).
# ----------------------------------------------------------------------------------------------------------

def proxy_main(listen_port, target_port, delay):
    counter = [0]

    async def forward(reader, writer, delay, state, upstream):
        loop = asyncio.get_running_loop()
        queue = asyncio.Queue(maxsize=512)  # bounded: at most 512 reads (32 MB) in flight per direction

        async def pump():
            while True:
                try:
                    data = await reader.read(65536)
                except (ConnectionError, OSError):
                    data = b""
                if data and upstream and state["last"] != "up":
                    state["turns"] += 1
                if data:
                    state["last"] = "up" if upstream else "down"
                await queue.put((loop.time() + delay, data))
                if not data:
                    return

        async def drain():
            while True:
                due, data = await queue.get()
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                try:
                    if not data:
                        if writer.can_write_eof():
                            writer.write_eof()
                        return
                    writer.write(data)
                    await writer.drain()
                except (ConnectionError, OSError):
                    return

        await asyncio.gather(pump(), drain())

    async def handle(client_reader, client_writer):
        counter[0] += 1
        ident = counter[0]
        state = {"turns": 0, "last": None}
        print(f"open {ident}", flush=True)
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", target_port)
        except OSError:
            client_writer.close()
            print(f"close {ident} turns=0", flush=True)
            return
        for sock in (client_writer, server_writer):
            sock.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.gather(forward(client_reader, server_writer, delay, state, True),
                             forward(server_reader, client_writer, delay, state, False),
                             return_exceptions=True)
        for w in (client_writer, server_writer):
            w.close()
        print(f"close {ident} turns={state['turns']}", flush=True)

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", listen_port, backlog=256)
        async with server:
            await server.serve_forever()

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    asyncio.run(main())


# ----------------------------------------------------------------------------------------------------------
# Trees: generated once per (kind, scale) and reused while make-tree.py is unchanged.
# ----------------------------------------------------------------------------------------------------------

class Tree:
    """One benchmark tree: its base and changed copies, and the stable source path every tool reads."""

    def __init__(self, work, kind, scale):
        self.kind, self.scale = kind, scale
        self.label = kind if scale == 1 else f"{kind}×{scale:g}"
        slug = kind if scale == 1 else f"{kind}-{scale:g}"
        self.slug = slug
        self.dir = os.path.join(work, "trees", slug)
        self.base = os.path.join(self.dir, "base")
        self.changed = os.path.join(self.dir, "changed")
        # The path every tool is given; a symlink switched between base and changed (an in-place change).
        self.current = os.path.join(work, "src", slug)
        self.manifests = {}
        self.files = self.bytes = 0

    def prepare(self):
        stamp = os.path.join(self.dir, "stamp")
        want = hashlib.sha256(open(MAKE_TREE, "rb").read()).hexdigest() + f" {self.kind} {self.scale}"
        if not (os.path.exists(stamp) and open(stamp).read() == want):
            log(f"generating tree {self.label}")
            shutil.rmtree(self.dir, ignore_errors=True)
            os.makedirs(self.dir)
            subprocess.run([sys.executable, MAKE_TREE, "--scale", str(self.scale), self.kind, self.base], check=True)
            subprocess.run(["cp", "-a", self.base, self.changed], check=True)
            subprocess.run([sys.executable, MAKE_TREE, "change", self.changed], check=True)
            with open(stamp, "w") as out:
                out.write(want)
        os.makedirs(os.path.dirname(self.current), exist_ok=True)
        self.use("base")
        files = [e for e in manifest(self.base, hash_files=False).values() if e[0] == "file"]
        self.files, self.bytes = len(files), sum(e[1] for e in files)

    def use(self, which):
        """Points the source path at the base or changed copy, atomically (rename over the old symlink)."""
        target = self.base if which == "base" else self.changed
        temporary = self.current + ".new"
        if os.path.lexists(temporary):
            os.unlink(temporary)
        os.symlink(target, temporary)
        os.replace(temporary, self.current)

    def warm(self, which):
        """Reads every file of the base or changed copy, so the next run finds the tree in the page cache.

        Why before every timed run: rclone's local backend drops the page cache of each file it reads
        (fadvise DONTNEED), so whichever tool ran after it read the whole tree from disk. Measured on the huge
        tree: Folio's initial run took 8.3-8.8 s right after an rclone run and 4.9-5.3 s right after another
        Folio run, and rsync 9.7-9.8 s against 5.4 s; every tool that never followed rclone was spared."""
        root = self.base if which == "base" else self.changed
        for folder, _, files in os.walk(root):
            for name in files:
                path = os.path.join(folder, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    with open(path, "rb", buffering=0) as handle:
                        while handle.read(1 << 20):
                            pass

    def manifest(self, which):
        if which not in self.manifests:
            self.manifests[which] = manifest(self.base if which == "base" else self.changed)
        return self.manifests[which]


# ----------------------------------------------------------------------------------------------------------
# Verification: destination equals source (paths, kinds, sizes, sha256); mtime agreement to the second.
# ----------------------------------------------------------------------------------------------------------

def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def manifest(root, hash_files=True):
    """{relative path: (kind, size, sha256, mtime seconds)} of a tree; skips Folio's `.folio` folder at the top."""
    entries = {}
    for folder, dirs, files in os.walk(root):
        relative_folder = os.path.relpath(folder, root)
        if relative_folder == ".":
            dirs[:] = [d for d in dirs if d != ".folio"]
            relative_folder = ""
        for name in dirs:
            entries[os.path.join(relative_folder, name)] = ("dir", 0, "", 0)
        for name in files:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            kind = "file" if os.path.isfile(path) and not os.path.islink(path) else "other"
            entries[os.path.join(relative_folder, name)] = (kind, info.st_size, None, int(info.st_mtime))
    if hash_files:
        for relative, (kind, size, _, mtime) in entries.items():
            if kind == "file":
                entries[relative] = (kind, size, sha256_of(os.path.join(root, relative)), mtime)
    return entries


def verify(source_manifest, destination):
    """(verified, first difference or None, files whose mtime agrees, files) of a destination."""
    if not os.path.isdir(destination):
        return False, "destination missing", 0, 0
    dest = manifest(destination, hash_files=False)
    missing = sorted(set(source_manifest) - set(dest))
    extra = sorted(set(dest) - set(source_manifest))
    if missing:
        return False, f"missing {missing[0]!r} (+{len(missing) - 1} more)", 0, 0
    if extra:
        return False, f"extra {extra[0]!r} (+{len(extra) - 1} more)", 0, 0
    agree = files = 0
    for relative in sorted(source_manifest):
        kind, size, digest, mtime = source_manifest[relative]
        dkind, dsize, _, dmtime = dest[relative]
        if kind != dkind:
            return False, f"{relative!r} is a {dkind}, not a {kind}", 0, 0
        if kind != "file":
            continue
        if size != dsize:
            return False, f"{relative!r} has {dsize} bytes, not {size}", 0, 0
        if sha256_of(os.path.join(destination, relative)) != digest:
            return False, f"{relative!r} differs in content", 0, 0
        files += 1
        agree += mtime == dmtime
    return True, None, agree, files


# ----------------------------------------------------------------------------------------------------------
# Tools: the command each one runs for a source, or None where it does not apply.
# ----------------------------------------------------------------------------------------------------------

class Context:
    """What the command builders need: binaries, server ports, keys, the work folder."""

    def __init__(self, args, work, folio, servers):
        self.args, self.work, self.folio, self.servers = args, work, folio, servers
        self.rclone_conf = os.path.join(work, "rclone.conf")
        self.graveyard = Graveyard(work)

    def ssh_port(self, source):
        s = self.servers
        if is_sftp_only(source):
            return s.sftp_only_rtt_port if source.endswith("+rtt") else s.sftp_only_port
        return s.ssh_rtt_port if source.endswith("+rtt") else s.ssh_port

    def http_port(self, source):
        s = self.servers
        if is_tls(source):
            return s.https_rtt_port if source.endswith("+rtt") else s.https_port
        return s.http_rtt_port if source.endswith("+rtt") else s.http_port

    def http_url(self, source):
        """The server's root URL for a WebDAV source."""
        return f"{'https' if is_tls(source) else 'http'}://127.0.0.1:{self.http_port(source)}/"

    def ssh_command(self, source):
        s = self.servers
        return (f"ssh -F /dev/null -p {self.ssh_port(source)} -i {s.user_key} -o IdentitiesOnly=yes "
                f"-o BatchMode=yes -o UserKnownHostsFile={s.known_hosts} -o GlobalKnownHostsFile=/dev/null "
                f"-o StrictHostKeyChecking=yes")

    def write_rclone_conf(self):
        """One named remote per network source; rclone reads only this file (--config)."""
        s = self.servers
        with open(self.rclone_conf, "w") as out:
            for source in SOURCES:
                kind = source_kind(source)
                name = rclone_remote(source)
                if kind == "sftp" and self.ssh_port(source):
                    out.write(f"[{name}]\ntype = sftp\nhost = 127.0.0.1\nport = {self.ssh_port(source)}\n"
                              f"user = root\nkey_file = {s.user_key}\nknown_hosts_file = {s.known_hosts}\n"
                              # What rclone detects and saves into its config on first use: written up front so
                              # every run, not only the first, sees rclone's steady state (no shell at all on an
                              # SFTP-only account).
                              + ("shell_type = none\n\n" if is_sftp_only(source) else
                                 "shell_type = unix\nmd5sum_command = md5sum\nsha1sum_command = sha1sum\n\n"))
                elif kind == "webdav" and self.http_port(source):
                    out.write(f"[{name}]\ntype = webdav\nurl = {self.http_url(source)}\nvendor = other\n\n")


def source_kind(source):
    """The protocol behind a source name: local, sftp (sftp-only included) or webdav (webdav-h2 included)."""
    return "sftp" if is_sftp_only(source) else "webdav" if is_tls(source) else source.split("+")[0]


def is_tls(source):
    """Whether the source is the WebDAV server over HTTPS with HTTP/2."""
    return source.split("+")[0] == "webdav-h2"


def is_sftp_only(source):
    """Whether the source is the sshd whose every command is the SFTP server (no shell: no rsync, no tar)."""
    return source.split("+")[0] == "sftp-only"


def rclone_remote(source):
    """The name of the source's remote in the harness's rclone.conf."""
    return source.replace("+", "_").replace("-", "_")


def tool_command(tool, source, tree, dest, ctx, scenario):
    """(argv, extra env) to mirror `tree` from `source` into `dest` with `tool`; None if it does not apply."""
    kind = source_kind(source)
    shell = not is_sftp_only(source)  # rsync and tar need a shell on the server
    path = tree.current  # absolute path on this machine, also the path the sshd serves
    url = f"{ctx.http_url(source)}{tree.slug}/" if kind == "webdav" else None
    certificate = ctx.servers.certificate if is_tls(source) else None
    remote = rclone_remote(source)
    if tool in ("folio", "folio-t8"):
        argv = [ctx.folio, "mirror", "--json"] + (["--transfers", "8"] if tool == "folio-t8" else [])
        if kind == "local":
            argv += [path, dest]
        elif kind == "sftp":
            argv += [f"sftp://root@127.0.0.1:{ctx.ssh_port(source)}{path}", dest,
                     "--identity", ctx.servers.user_key, "--known-hosts", ctx.servers.known_hosts]
        else:
            argv += [url, dest] + (["--ca-file", certificate] if certificate else [])
        return argv, {"FOLIO_STATE_DIR": dest + ".state"}
    if tool in ("rclone", "rclone-t8"):
        extra = ["--transfers", "8"] if tool == "rclone-t8" else []
        src = path if kind == "local" else f"{remote}:{path}" if kind == "sftp" else f"{remote}:{tree.slug}"
        trust = ["--ca-cert", certificate] if certificate else []
        return ["rclone", "--config", ctx.rclone_conf, "sync", *extra, *trust, src, dest], {}
    if tool == "rsync":
        if kind == "local":
            return ["rsync", "-a", "--delete", path + "/", dest + "/"], {}
        if kind == "sftp" and shell:
            return ["rsync", "-a", "--delete", "-e", ctx.ssh_command(source), f"root@127.0.0.1:{path}/",
                    dest + "/"], {}
        return None
    if tool == "lftp":
        if kind == "sftp":
            script = (f"set sftp:connect-program {shlex.quote(ctx.ssh_command(source).replace(' -p ', ' -a -x -p '))}; "
                      f"open -u root, sftp://127.0.0.1:{ctx.ssh_port(source)}; "
                      f"mirror --delete --parallel=8 {shlex.quote(path + '/')} {shlex.quote(dest)}")
        elif kind == "webdav":
            # The server speaks WebDAV, so lftp lists with PROPFIND (exact sizes and times) instead of HTML.
            trust = f"set ssl:ca-file {shlex.quote(certificate)}; " if certificate else ""
            script = (f"{trust}set http:use-propfind true; open {ctx.http_url(source)}; "
                      f"mirror --delete --parallel=8 {shlex.quote('/' + tree.slug + '/')} {shlex.quote(dest)}")
        else:
            return None
        return ["lftp", "-c", script], {}
    if tool == "tar":
        # One stream, no listing or comparison: the floor for an initial copy (not a mirror tool).
        if scenario != "initial":
            return None
        if kind == "local":
            pipeline = f"tar -C {shlex.quote(path + '/')} -cf - . | tar -C {shlex.quote(dest)} -xf -"
        elif kind == "sftp" and shell:
            pipeline = (f"{ctx.ssh_command(source)} root@127.0.0.1 {shlex.quote('tar -C ' + shlex.quote(path + '/') + ' -cf - .')}"
                        f" | tar -C {shlex.quote(dest)} -xf -")
        else:
            return None
        return ["bash", "-o", "pipefail", "-c", f"mkdir -p {shlex.quote(dest)} && {pipeline}"], {}
    if tool == "curl":
        # One curl process fetching every file over one kept-alive connection: raw HTTP throughput (media only).
        if scenario != "initial" or kind != "webdav" or tree.kind != "media":
            return None
        config = dest + ".curl"
        with open(config, "w") as out:
            for relative, (k, *_rest) in sorted(tree.manifest("base").items()):
                if k == "file":
                    out.write(f'url = "{url}{urllib.parse.quote(relative)}"\n')
                    out.write(f'output = "{os.path.join(dest, relative)}"\n')
        trust = ["--cacert", certificate] if certificate else []
        return ["curl", "-sS", "--fail", "--create-dirs", "--remote-time", *trust, "-K", config], {}
    return None


# ----------------------------------------------------------------------------------------------------------
# One measured run.
# ----------------------------------------------------------------------------------------------------------

def run_measured(argv, env, log_path, timeout):
    """Runs argv; returns (seconds, exit code or 'timeout', max RSS in MiB, seconds of a `sync` right after).

    The `sync` after the tool shows what its time leaves unpaid: Folio makes every file durable before it
    exits (guarantee 2 of DESIGN.md), the other tools leave their writes in the page cache for the kernel.

    Time is time.monotonic around the child. Max RSS is wait4's ru_maxrss of the tool, read by GNU time, which
    spawns the tool and waits for it: measured from our own Python child, wait4 would also count this
    interpreter's memory, because Linux carries the RSS high-water mark of the forked parent image across exec.
    ru_maxrss is the largest single process among the tool and the descendants it waited for."""
    rss_file = log_path + ".rss"
    with open(log_path, "ab") as out:
        out.write(("$ " + " ".join(shlex.quote(a) for a in argv) + "\n").encode())
        out.flush()
        # Why sync first (untimed): the previous tool's (and the harness's) unflushed writes would otherwise be
        # flushed during this run, by the kernel or by a tool that makes its files durable (Folio's syncfs).
        os.sync()
        start = time.monotonic()
        # A new session, so a timeout can kill the tool's whole process group (ssh children included).
        child = subprocess.Popen([GNU_TIME, "-f", "%M", "-o", rss_file, *argv], stdin=subprocess.DEVNULL,
                                 stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env},
                                 start_new_session=True)
        # A pidfd becomes readable the moment the child exits (Popen.wait(timeout) would poll, adding up to
        # 50 ms to each measurement).
        pidfd = os.pidfd_open(child.pid)
        exited, _, _ = select.select([pidfd], [], [], timeout)
        seconds = time.monotonic() - start
        os.close(pidfd)
        flush = None
        if exited:
            status = child.wait()
            flushing = time.monotonic()
            os.sync()
            flush = time.monotonic() - flushing
        else:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            status = "timeout"
    try:
        os.killpg(child.pid, signal.SIGKILL)  # stray grandchildren (an ssh left behind by a finished tool)
    except ProcessLookupError:
        pass
    rss = None
    try:
        lines = open(rss_file).read().split()
        rss = int(lines[-1]) / 1024 if lines and lines[-1].isdigit() else None
        os.unlink(rss_file)
    except OSError:
        pass
    return (timeout if status == "timeout" else seconds), status, rss, flush


def folio_result(log_path):
    """(result, error) of folio's last target-done NDJSON line in its log, if any."""
    result = error = None
    for line in read_from(log_path, 0).splitlines():
        if '"target-done"' in line:
            try:
                done = json.loads(line)
                result, error = done.get("result"), done.get("error")
            except ValueError:
                pass
    return result, error


class Graveyard:
    """Where replaced destinations wait to be deleted, all at once and never just before a timed run.

    Why: on ext4 without a journal (this machine's root file system) the inode allocator avoids inodes freed in
    the last 60 s (6 min once their inode table block is dirty again, which the next files created make it), and
    checks every free inode it passes, reading its dtime, on each file it creates. Deleting a tool's 100,000-file
    destination right before timing its next initial run made that run 2-4x slower by an amount that changed from
    one repetition to the next (10-43 s for the same tool), whichever tool it was. Replaced destinations of trees
    with many files are renamed in here instead (an instant rename that frees nothing) and deleted when the run
    ends; a destination of a few large files is deleted at once (it frees a handful of inodes). Should they pass
    a size budget, they are deleted mid-run and the harness waits out the recency window before timing again."""

    BUDGET_BYTES = 16 << 30
    RECENCY_WAIT_S = 370
    FEW_FILES = 200

    def __init__(self, work):
        self.dir = os.path.join(work, "graveyard")
        self.bytes = 0

    def bury(self, path, estimated_bytes, files):
        if not os.path.lexists(path):
            return
        if files < self.FEW_FILES:
            shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
            return
        os.makedirs(self.dir, exist_ok=True)
        grave = os.path.join(self.dir, f"{time.monotonic_ns()}-{os.path.basename(path)}")
        os.rename(path, grave)
        self.bytes += estimated_bytes

    def make_room(self):
        """Purges (and waits out the recency window) once the buried destinations pass the budget."""
        if self.bytes > self.BUDGET_BYTES:
            self.purge(wait=True)

    def purge(self, wait):
        if not os.path.isdir(self.dir) or not os.listdir(self.dir):
            return
        log(f"deleting replaced destinations{f', then waiting {self.RECENCY_WAIT_S} s for the inode allocator' if wait else ''}")
        shutil.rmtree(self.dir)
        self.bytes = 0
        if wait:
            os.sync()
            time.sleep(self.RECENCY_WAIT_S)


def reset_destination(dest, tree, graveyard):
    for path in (dest, dest + ".state", dest + ".curl"):
        # A destination holds the tree, each file in whole blocks; the rest is small.
        graveyard.bury(path, tree.bytes + 4096 * tree.files if path == dest else 0, tree.files)
    graveyard.make_room()
    os.makedirs(dest)


def run_chain(tool, source, tree, ctx, scenarios, rep, results):
    """Initial, no-change and incremental runs of one tool on one tree and source, in that order.

    The initial run is the setup of the other two, so it always runs; if it fails, the later ones are recorded as
    failed (skipped) rather than timed, since they would no longer measure what their name says."""
    dest = os.path.join(ctx.work, "dest", f"{tree.slug}-{source.replace('+', '_')}-{tool}")
    logs = os.path.join(ctx.work, "logs")
    os.makedirs(logs, exist_ok=True)
    tree.use("base")
    reset_destination(dest, tree, ctx.graveyard)
    chain_ok = True
    for scenario in SCENARIOS:
        if scenario != "initial" and scenario not in scenarios:
            continue
        command = tool_command(tool, source, tree, dest, ctx, scenario)
        if command is None:
            if scenario == "initial":
                return
            continue
        key = (tree.label, source, scenario, tool)
        record = {"tree": tree.label, "files": tree.files, "source": source, "scenario": scenario, "tool": tool,
                  "rep": rep}
        if not chain_ok:
            record.update(ok=False, error="skipped: the initial run failed")
        else:
            if scenario == "incremental":
                tree.use("changed")
            which = "changed" if scenario == "incremental" else "base"
            log_path = os.path.join(logs, f"{tree.slug}-{source.replace('+', '_')}-{tool}-{scenario}-{rep}.log")
            if os.path.exists(log_path):
                os.unlink(log_path)
            tree.warm(which)
            before = ctx.servers.counters()
            seconds, status, rss, flush = run_measured(command[0], command[1], log_path, ctx.args.timeout)
            requests, round_trips = ctx.servers.count_since(source, tool, before)
            record.update(seconds=seconds, flush_s=flush, status=status, rss_mib=rss, requests=requests, round_trips=round_trips,
                          log=os.path.relpath(log_path, REPO))
            if status != 0:
                tail = read_from(log_path, 0).strip().splitlines()[-1:] or [""]
                result, error = folio_result(log_path) if tool.startswith("folio") else (None, None)
                reason = f"folio {result}: {error}" if result else tail[0]
                record.update(ok=False, error=f"exit {status}: {reason[:160]}")
            else:
                ok, difference, agree, files = verify(tree.manifest(which), dest)
                record.update(ok=ok, verified=ok, mtimes_agree=agree, files_checked=files,
                              error=None if ok else f"not a mirror: {difference}")
                if tool.startswith("folio") and ok and folio_result(log_path)[0] not in ("synced", "unchanged"):
                    record.update(ok=False, error=f"folio reported {folio_result(log_path)[0]}")
        if scenario == "initial":
            chain_ok = record["ok"]
        if scenario in scenarios:
            results.append(record)
            state = f"{record['seconds']:.2f} s" if record.get("ok") else f"FAILED ({record['error']})"
            log(f"  rep {rep} {tree.label:12} {source:11} {scenario:11} {tool:10} {state}")
    tree.use("base")


# ----------------------------------------------------------------------------------------------------------
# Report: medians, ratios, targets; markdown and JSON.
# ----------------------------------------------------------------------------------------------------------

TARGETS = [  # (description, predicate on (tree kind, source, scenario), limit of folio / best other)
    ("no-change re-run ≤ 0.5", lambda k, s, c: c == "no-change" and not s.endswith("+rtt"), 0.5),
    ("initial small files ≤ 0.7", lambda k, s, c: c == "initial" and k in ("small", "huge")
     and not s.endswith("+rtt"), 0.7),
    ("media throughput ≤ 1.0", lambda k, s, c: c == "initial" and k == "media" and not s.endswith("+rtt"), 1.0),
    ("20 ms RTT no-change ≤ 0.2", lambda k, s, c: c == "no-change" and s.endswith("+rtt"), 0.2),
    ("20 ms RTT initial ≤ 0.5", lambda k, s, c: c == "initial" and s.endswith("+rtt"), 0.5),
]
MEMORY_TARGET_MB = 50


def summarize(records):
    """One row per tree × source × scenario × tool: median of the repetitions, or failed if any failed."""
    rows = {}
    for r in records:
        rows.setdefault((r["tree"], r["source"], r["scenario"], r["tool"]), []).append(r)
    out = []
    for (tree, source, scenario, tool), runs in rows.items():
        ok = all(r["ok"] for r in runs)
        row = {"tree": tree, "files": runs[0]["files"], "source": source, "scenario": scenario, "tool": tool,
               "runs": len(runs), "ok": ok, "errors": sorted({r["error"] for r in runs if r.get("error")}),
               "seconds": [round(r["seconds"], 3) for r in runs if "seconds" in r]}
        if ok:
            row["median_s"] = statistics.median(r["seconds"] for r in runs)
            row["median_on_disk_s"] = statistics.median(r["seconds"] + (r.get("flush_s") or 0) for r in runs)
        row["max_rss_mib"] = max((r["rss_mib"] for r in runs if r.get("rss_mib") is not None), default=None)
        for counter in ("requests", "round_trips"):
            values = [r[counter] for r in runs if r.get(counter) is not None]
            row[counter] = statistics.median(values) if values else None
        agree = [(r["mtimes_agree"], r["files_checked"]) for r in runs if r.get("verified")]
        row["mtimes"] = agree[-1] if agree else None
        out.append(row)
    # Ratios: folio's median over this row's median; for folio's own row, over the best mirror tool.
    for row in out:
        group = [r for r in out if (r["tree"], r["source"], r["scenario"]) ==
                 (row["tree"], row["source"], row["scenario"])]
        folio = next((r for r in group if r["tool"] == "folio"), None)
        best = min((r for r in group if r["tool"] in MIRROR_TOOLS and r["ok"]), key=lambda r: r["median_s"],
                   default=None)
        other = best if row["tool"] == "folio" else row
        if folio and folio["ok"] and other and other.get("median_s"):
            row["ratio"] = folio["median_s"] / other["median_s"]
            row["ratio_on_disk"] = folio["median_on_disk_s"] / other["median_on_disk_s"]
        row["best_other"] = best["tool"] if best and row["tool"] == "folio" else None
    return out


def target_checks(rows):
    checks = []
    for row in rows:
        if row["tool"] != "folio":
            continue
        kind = row["tree"].split("×")[0]
        for description, applies, limit in TARGETS:
            # The SFTP-only and HTTP/2 rows are shown beside the sources, not judged by its targets.
            if applies(kind, row["source"], row["scenario"]) and not is_sftp_only(row["source"]) and not is_tls(row["source"]):
                ratio = row.get("ratio")
                met = "n/a (no verified comparator)" if row["ok"] and ratio is None else \
                    "no (folio failed)" if not row["ok"] else ("yes" if ratio <= limit else "no")
                checks.append({"target": description, "tree": row["tree"], "source": row["source"],
                               "scenario": row["scenario"], "ratio": ratio, "ratio_on_disk": row.get("ratio_on_disk"),
                               "best_other": row["best_other"], "met": met})
        if kind == "huge" and row.get("max_rss_mib") is not None:
            # The target is in MB (10^6 bytes); the column is MiB.
            megabytes = row["max_rss_mib"] * 2**20 / 1e6
            met = ("yes" if megabytes <= MEMORY_TARGET_MB else "no") if row["files"] >= 100_000 else \
                f"n/a: scaled tree of {row['files']:,} files"
            checks.append({"target": f"peak memory at 100,000 files ≤ {MEMORY_TARGET_MB} MB", "tree": row["tree"],
                           "source": row["source"], "scenario": row["scenario"], "ratio": None,
                           "rss": megabytes, "best_other": None, "met": met})
    return checks


def fmt(value, pattern):
    return "—" if value is None else pattern.format(value)


def write_markdown(path, meta, rows, checks):
    lines = [f"# Folio benchmark — {meta['finished']}", "",
             f"- Command: `{meta['command']}` ({meta['wall_minutes']:.1f} min wall)",
             f"- Machine: {meta['machine']}; load average at start {meta['load_start']}",
             "- Repetitions: " + ", ".join(f"{t} {n}" for t, n in meta["repetitions"].items() if t in meta["trees"])
             + " (median shown; a row with any failed repetition shows failed)",
             "- Trees: " + ", ".join(meta["tree_sizes"]) + (f"; chains left out: {', '.join(meta['skipped'])}"
                                                             if meta["skipped"] else ""),
             "- Conditions: warm page cache (the source tree read before every timed run; nothing dropped), `sync` before every timed run, loopback 127.0.0.1; `+rtt` rows go through the "
             "harness's delay proxy (+10 ms each way = 20 ms RTT)",
             "- Versions: " + "; ".join(f"{k} {v}" for k, v in meta["versions"].items()), "",
             "`folio/this` is Folio's median divided by this row's; on Folio's own row, by the best mirror tool's "
             "(rclone, rclone-t8, rsync, lftp — not tar/curl, which are practical limits). Below 1 means Folio is "
             "faster. `requests`: nginx access-log lines (WebDAV) or SFTP requests logged by sftp-server (every request; rsync and tar run a remote command instead, so only their round trips count). "
             "`round trips`: client→server flights counted by the delay proxy. Max RSS is the largest process "
             "of the tool's own process tree (for SFTP/WebDAV, the server side is not included). "
             "`s to disk` adds a `sync` run right after the tool: Folio has made every file durable before it "
             "exits, the other tools leave their writes for the kernel to flush later; `on disk` is Folio's ratio "
             "on that figure.", "",
             "| tree | source | scenario | tool | median s | folio/this | s to disk | on disk | max RSS MiB | requests "
             "| round trips | verified | mtimes agree |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    order = {name: i for i, name in enumerate(SOURCES + SCENARIOS + TOOLS + TREES)}
    for row in sorted(rows, key=lambda r: (order[r["tree"].split("×")[0]], r["tree"], order[r["source"]],
                                           order[r["scenario"]], order[r["tool"]])):
        verified = "yes" if row["ok"] else "**failed**: " + "; ".join(row["errors"])[:200].replace("|", "/")
        mtimes = row["mtimes"]
        agree = "—" if mtimes is None else "yes" if mtimes[0] == mtimes[1] else f"no ({mtimes[0]}/{mtimes[1]})"
        tool = f"**{row['tool']}**" if row["tool"] == "folio" else row["tool"]
        ratio = fmt(row.get("ratio"), "{:.2f}")
        if row["tool"] == "folio" and row.get("best_other"):
            ratio += f" (vs {row['best_other']})"
        lines.append(f"| {row['tree']} ({row['files']:,} files) | {row['source']} | {row['scenario']} | {tool} | "
                     f"{fmt(row.get('median_s'), '{:.2f}')} | {ratio} | {fmt(row.get('median_on_disk_s'), '{:.2f}')} | "
                     f"{fmt(row.get('ratio_on_disk'), '{:.2f}')} | {fmt(row['max_rss_mib'], '{:.0f}')} | "
                     f"{fmt(row['requests'], '{:,.0f}')} | {fmt(row['round_trips'], '{:,.0f}')} | {verified} | "
                     f"{agree} |")
    lines += ["", "## Targets (Folio / best mirror tool)", "",
              "`met` is judged on the timed figure, as the targets are written; `on disk` is the same ratio with "
              "every tool's writes flushed.", "",
              "| target | tree | source | scenario | value | on disk | met |",
              "|---|---|---|---|---:|---:|---|"]
    for c in checks:
        value = fmt(c.get("rss"), "{:.0f} MB") if "rss" in c else \
            fmt(c["ratio"], "{:.2f}") + (f" vs {c['best_other']}" if c["best_other"] else "")
        lines.append(f"| {c['target']} | {c['tree']} | {c['source']} | {c['scenario']} | {value} | "
                     f"{fmt(c.get('ratio_on_disk'), '{:.2f}')} | {c['met']} |")
    if meta.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in meta["notes"]]
    with open(path, "w") as out:
        out.write("\n".join(lines) + "\n")


def write_json(path, document):
    """The results as JSON, one row, target or run per line: small enough to commit, readable in a diff."""
    with open(path, "w") as out:
        out.write("{\n")
        for index, (key, value) in enumerate(document.items()):
            out.write(f"{json.dumps(key)}: ")
            if isinstance(value, list):
                out.write("[\n" + ",\n".join(json.dumps(item, ensure_ascii=False) for item in value) + "\n]")
            else:
                out.write(json.dumps(value, ensure_ascii=False))
            out.write(",\n" if index < len(document) - 1 else "\n")
        out.write("}\n")


def update_readme(table_path):
    """Replaces the part of Benchmarks/README.md between the latest markers with the table just written."""
    readme = os.path.join(HERE, "README.md")
    text = open(readme).read()
    begin, end = "<!-- latest:begin -->\n", "<!-- latest:end -->"
    if begin not in text or end not in text:
        log("README.md has no latest markers; left unchanged")
        return
    table = open(table_path).read().replace("# Folio benchmark", "### Folio benchmark", 1)
    head, rest = text.split(begin, 1)
    open(readme, "w").write(head + begin + table + rest[rest.index(end):])
    log("updated the table in Benchmarks/README.md")


# ----------------------------------------------------------------------------------------------------------
# Main.
# ----------------------------------------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trees", default=",".join(TREES), help="comma list of %s" % ",".join(TREES))
    p.add_argument("--sources", default=",".join(DEFAULT_SOURCES),
                   help="comma list of %s (default: all but the sftp-only ones)" % ",".join(SOURCES))
    p.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma list of %s" % ",".join(SCENARIOS))
    p.add_argument("--tools", default=",".join(DEFAULT_TOOLS),
                   help="comma list of %s (default: all but folio-t8)" % ",".join(TOOLS))
    p.add_argument("--repetitions", "-n", default="3",
                   help="runs of each chain: one count for all (3) or per tree (small=3,media=3,huge=1); default 3")
    p.add_argument("--skip", action="append", default=[], metavar="TREE:SOURCE:TOOL",
                   help="leave out matching chains (shell patterns, repeatable), e.g. 'huge:*:*' or 'huge:sftp*:rclone*'")
    p.add_argument("--scale", default="1",
                   help="tree scale: one factor for all (0.1) or per tree (small=1,huge=0.2,media=0.5); default 1")
    p.add_argument("--rtt-scale", default="1",
                   help="extra factor for the +rtt sources' trees, for all (0.5) or per tree (small=0.5): per-file "
                   "round trips make those rows slow; default 1")
    p.add_argument("--quick", action="store_true",
                   help="trees scaled down to ~200 files (media: 30), one repetition: a smoke check in a few minutes")
    p.add_argument("--timeout", type=float, default=600, help="seconds before a run is killed and failed")
    p.add_argument("--work", default=os.path.join(HERE, "work"), help="work folder (trees, servers, logs)")
    p.add_argument("--output", help="output path without extension: writes .md and .json (default "
                   "results/latest, which also updates the table in Benchmarks/README.md; work/quick with --quick)")
    p.add_argument("--folio", help="use this folio binary instead of building one")
    p.add_argument("--no-build", action="store_true", help="use .build/release/folio as it is")
    p.add_argument("--no-install", action="store_true", help="do not apt-get install missing tools")
    p.add_argument("--prepare", action="store_true", help="only generate the trees, then exit")
    p.add_argument("--serve", action="store_true",
                   help="start the servers and proxies, print how to reach them, wait for Ctrl-C (debugging)")
    p.add_argument("--note", action="append", default=[], help="a note to add to the report")
    args = p.parse_args(argv)

    def listed(text, allowed, what):
        items = [i.strip() for i in text.split(",") if i.strip()]
        for item in items:
            if item not in allowed:
                p.error(f"unknown {what} {item!r}; choose from {', '.join(allowed)}")
        return items
    args.trees = listed(args.trees, TREES, "tree")
    args.sources = listed(args.sources, SOURCES, "source")
    args.scenarios = listed(args.scenarios, SCENARIOS, "scenario")
    args.tools = listed(args.tools, TOOLS, "tool")
    def per_tree(text, default, convert):
        values = {}
        for part in text.split(","):
            if "=" in part:
                name, value = part.split("=", 1)
                if name.strip() not in TREES:
                    p.error(f"unknown tree {name!r} in {text!r}")
                values[name.strip()] = convert(value)
            else:
                values = {t: convert(part) for t in TREES}
        return {t: values.get(t, default) for t in TREES}
    args.scales = {t: f * (QUICK_SCALES[t] if args.quick else 1) for t, f in per_tree(args.scale, 1.0, float).items()}
    args.repetitions = {t: 1 if args.quick else n for t, n in per_tree(args.repetitions, 3, int).items()}
    args.rtt_scales = per_tree(args.rtt_scale, 1.0, float)
    # A smoke check never replaces the committed results; only a default full run updates the README.
    args.update_readme = args.output is None and not args.quick
    if args.output is None:
        args.output = os.path.join(args.work, "quick") if args.quick else os.path.join(HERE, "results", "latest")
    return args


def lock_work(work, program):
    """Makes the work folder and takes its lock, held while the returned file stays open (keep it).

    One user of a work folder at a time: a second would rewrite the keys, known_hosts and rclone.conf under the
    first (scripts/make-link-order.py uses the same servers)."""
    os.makedirs(work, exist_ok=True)
    lock = open(os.path.join(work, ".lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SystemExit(f"{program}: another run is using {work}; wait for it or pass --work")
    return lock


def interrupt_on_signals():
    """Makes SIGTERM and SIGINT raise KeyboardInterrupt, so that the caller's `finally` stops the servers.

    Explicit handlers: a shell's background job starts with SIGINT ignored, and SIGTERM would end the process
    without cleaning up; either way the servers, each in a session of its own, would be left running."""
    def interrupted(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)


def main(argv):
    args = parse_args(argv)
    started = time.monotonic()
    work = os.path.abspath(args.work)
    lock = lock_work(work, "bench")  # noqa: F841  (held until the run ends)
    load_start = ", ".join(f"{x:.2f}" for x in os.getloadavg())

    # Trees first (deterministic; reused across runs while make-tree.py is unchanged).
    trees = {}  # (kind, rtt?) -> Tree
    for kind in args.trees:
        trees[(kind, False)] = Tree(work, kind, args.scales[kind])
        if any(s.endswith("+rtt") for s in args.sources) and args.rtt_scales[kind] != 1:
            trees[(kind, True)] = Tree(work, kind, round(args.scales[kind] * args.rtt_scales[kind], 6))
    for tree in {t.slug: t for t in trees.values()}.values():
        tree.prepare()
    if args.prepare:
        return 0

    if not args.no_install:
        install_packages()
    folio = build_folio(args)
    # Read now, not when the run ends: the commit is the one the binary was built from, even if the tree changes
    # while the run goes on.
    versions = tool_versions(folio)
    processes = Processes()

    interrupt_on_signals()
    records = []
    ctx = None
    notes = list(args.note)
    try:
        servers = Servers(work, processes, os.path.join(work, "src"))
        kinds = {s.split("+")[0] for s in args.sources}
        if "sftp" in kinds:
            servers.start_sshd()
            if "sftp+rtt" in args.sources:
                servers.ssh_rtt_port = servers.start_proxy("sftp", servers.ssh_port)
        if "sftp-only" in kinds:
            servers.start_sshd(sftp_only=True)
            if "sftp-only+rtt" in args.sources:
                servers.sftp_only_rtt_port = servers.start_proxy("sftp-only", servers.sftp_only_port)
        if kinds & {"sftp", "sftp-only"}:
            servers.write_known_hosts()
        if kinds & {"webdav", "webdav-h2"}:
            servers.start_nginx(tls="webdav-h2" in kinds)
            if "webdav+rtt" in args.sources:
                servers.http_rtt_port = servers.start_proxy("webdav", servers.http_port)
            if "webdav-h2+rtt" in args.sources:
                servers.https_rtt_port = servers.start_proxy("webdav-h2", servers.https_port)
        ctx = Context(args, work, folio, servers)
        ctx.write_rclone_conf()
        if not args.serve:
            ctx.graveyard.purge(wait=True)  # a previous run's leftovers
        log(f"servers up: sshd {servers.ssh_port}, nginx {servers.http_port}, "
            f"proxies sftp {servers.ssh_rtt_port} webdav {servers.http_rtt_port}"
            + (f"; nginx https {servers.https_port}, proxy {servers.https_rtt_port}" if "webdav-h2" in kinds else "")
            + (f"; sftp-only sshd {servers.sftp_only_port}, proxy {servers.sftp_only_rtt_port}" if "sftp-only" in kinds else ""))
        if args.serve:
            log(f"ssh: {ctx.ssh_command('sftp')} root@127.0.0.1; rclone --config {ctx.rclone_conf}; "
                f"sources under {servers.serve_root}. Ctrl-C stops them.")
            signal.pause()

        for kind in args.trees:
            for rep in range(1, args.repetitions[kind] + 1):
                for source in args.sources:
                    tree = trees.get((kind, source.endswith("+rtt")), trees[(kind, False)])
                    # Odd repetitions run the tools in the given order, even ones in reverse: the first chain
                    # after a tree change (or after the previous source's chains) meets the file system's
                    # backlog (writeback), and no tool should always be the one to.
                    for tool in (args.tools if rep % 2 == 1 else list(reversed(args.tools))):
                        if any(fnmatch.fnmatchcase(f"{kind}:{source}:{tool}", pattern) for pattern in args.skip):
                            continue
                        try:
                            run_chain(tool, tree=tree, source=source, ctx=ctx, scenarios=args.scenarios,
                                      rep=rep, results=records)
                        except (OSError, subprocess.SubprocessError, ValueError) as error:
                            # A broken chain (say, a destination we cannot read back) fails its row, not the run.
                            log(f"  rep {rep} {tree.label} {source} {tool}: chain aborted: {error!r}")
                            records.append({"tree": tree.label, "files": tree.files, "source": source,
                                            "scenario": "initial", "tool": tool, "rep": rep, "ok": False,
                                            "error": f"harness error: {error!r}"[:200]})
                            tree.use("base")
    except KeyboardInterrupt:
        notes.append("The run was interrupted; rows missing from this table were not run.")
        log("interrupted: writing what was measured so far")
    finally:
        processes.stop_all()
        if ctx is not None:
            ctx.graveyard.purge(wait=False)
    if args.serve:
        return 0

    rows = summarize(records)
    checks = target_checks(rows)
    meta = {"finished": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "command": "python3 Benchmarks/run.py " + " ".join(shlex.quote(a) for a in argv),
            "wall_minutes": (time.monotonic() - started) / 60, "machine": machine_description(),
            "load_start": load_start, "repetitions": args.repetitions, "skipped": args.skip, "versions": versions,
            "scales": args.scales, "rtt_scales": args.rtt_scales, "notes": notes, "trees": args.trees,
            "tree_sizes": [f"{t.label} = {t.files:,} files, {t.bytes / 2**20:,.0f} MiB" for t in
                           {t.slug: t for t in trees.values()}.values() if any(r["tree"] == t.label for r in records)]}
    output = os.path.abspath(args.output)
    os.makedirs(os.path.dirname(output), exist_ok=True)
    write_markdown(output + ".md", meta, rows, checks)
    write_json(output + ".json", {"meta": meta, "rows": rows, "targets": checks, "runs": records})
    log(f"wrote {output}.md and {output}.json")
    if args.update_readme:
        update_readme(output + ".md")
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "proxy":
        proxy_main(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
    else:
        sys.exit(main(sys.argv[1:]))
