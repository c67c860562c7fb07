# Two entry points for a fresh Debian 12 machine: `make serve` and `make test`.
BUILD_DIR ?= build
JOBS ?= 2
LISTEN ?= 127.0.0.1:50051
METRICS_LISTEN ?= 127.0.0.1:9400

.PHONY: deps configure build test serve clean

deps:
	bash scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: configure
	cmake --build $(BUILD_DIR) -j$(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS)

serve: build
	bash scripts/serve.sh $(BUILD_DIR) $(LISTEN) $(METRICS_LISTEN)

clean:
	rm -rf $(BUILD_DIR)
