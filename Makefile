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
release: deps
	$(SWIFT) build -c release --static-swift-stdlib --product folio

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
