# Folio — the commands in README.md. Run as root on Debian 12 (the first step installs Debian packages).
SWIFT ?= swift
DEMO_MIRROR ?= $(CURDIR)/demo-mirror

.PHONY: deps build release demo test bench install clean

deps:
	./scripts/install-deps.sh

build: deps
	$(SWIFT) build

## The Swift runtime and Foundation linked in (--static-swift-stdlib): a run starts 5-7 ms sooner (fewer shared
## libraries to load and bind), which is a fifth of a no-change run of a small tree.
##
## Linked by lld with the functions a run uses side by side (scripts/link-order.txt, made by
## scripts/make-link-order.py; every function in a section of its own so the linker can move it) and the
## pointers to relocate packed (RELR). Why: the kernel maps the 64 KiB around every page of code a process
## touches, and a run's 1 MB of code was spread over 10.5 MiB of a 20 MB .text, all of it counted in its memory;
## the 2 MB relocation table was read whole at every start. 100,000 files over WebDAV, no change: peak RSS
## 51.0 -> 45.2 MiB.
## A stale order file costs only memory (names it lists that are gone are skipped). Without ld.lld on PATH
## (Swift's Linux toolchains ship it beside swift) or with a glibc older than 2.36 (no RELR), the build links as
## Swift does by default. A binary linked with RELR needs glibc 2.36 where it runs, too (GLIBC_ABI_DT_RELR).
##
## Without SwiftPM's $ORIGIN run path (--disable-local-rpath): folio needs no library from its own folder, and
## with it the loader first looked for each of its libraries in the folder the binary is in (/usr/local/bin
## once installed), ten failed opens per library at every start.
RELEASE_FLAGS := -c release --static-swift-stdlib --disable-local-rpath --product folio
HAS_LLD := $(shell command -v ld.lld 2>/dev/null)
HAS_RELR := $(shell getconf GNU_LIBC_VERSION 2>/dev/null | awk '{ split($$2, v, "."); if (v[1] > 2 || (v[1] == 2 && v[2] >= 36)) print "yes" }')
ifneq ($(and $(HAS_LLD),$(HAS_RELR)),)
RELEASE_FLAGS += -Xswiftc -Xfrontend -Xswiftc -function-sections \
	-Xswiftc -use-ld=lld -Xlinker --symbol-ordering-file=$(CURDIR)/scripts/link-order.txt \
	-Xlinker --no-warn-symbol-ordering -Xlinker -z -Xlinker pack-relative-relocs
endif
## RELEASE_EXTRA: more flags for one build (scripts/make-link-order.py asks the linker for its map).
release: deps
	@# SwiftPM relinks when an object or a flag changes, not when the order file does.
	@if [ scripts/link-order.txt -nt .build/release/folio ]; then rm -f .build/release/folio; fi
	$(SWIFT) build $(RELEASE_FLAGS) $(RELEASE_EXTRA)

## Builds folio and mirrors the bundled demo library into ./demo-mirror, with live progress.
demo: build
	FOLIO_STATE_DIR=$(DEMO_MIRROR).state .build/debug/folio mirror Examples/demo-library $(DEMO_MIRROR)
	@echo
	@echo "Mirrored into $(DEMO_MIRROR). Edit or delete something in Examples/demo-library and run 'make demo' again:"
	@echo "only the change moves, and what was removed or replaced waits in $(DEMO_MIRROR)/.folio/trash/."

## Builds and runs every test (unit, engine, end-to-end, against real servers on 127.0.0.1).
test: deps
	$(SWIFT) build --build-tests
	SWIFT=$(SWIFT) ./scripts/run-tests.sh
	./scripts/verify-systemd.sh

## Benchmarks folio against rclone, rsync, lftp (and tar/curl) on loopback servers; see Benchmarks/README.md.
## Options go in BENCH_ARGS, e.g. make bench BENCH_ARGS="--quick" (scaled-down trees, one repetition).
BENCH_ARGS ?=
bench: deps
	python3 Benchmarks/run.py $(BENCH_ARGS)

install: release
	install -m 0755 -s .build/release/folio /usr/local/bin/folio

clean:
	rm -rf .build demo-mirror demo-mirror.state
