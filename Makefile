# Two entry points for a fresh Debian 12 machine: `make serve` and `make test`.
BUILD_DIR ?= build
JOBS ?= 2
LISTEN ?= 127.0.0.1:50051
METRICS_LISTEN ?= 127.0.0.1:9400
# `make serve MODEL=DIR` serves that checkpoint instead of the demo model.
MODEL ?=

.PHONY: deps configure build test serve python-client clean

deps:
	bash scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: configure
	cmake --build $(BUILD_DIR) -j$(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS) -LE llama_cpp

# Python stubs for client/python, into $(BUILD_DIR)/client/python/gen (see client/python/README.md).
python-client: configure
	cmake --build $(BUILD_DIR) --target placer_python_stubs

serve: build
	MODEL="$(MODEL)" bash scripts/serve.sh $(BUILD_DIR) $(LISTEN) $(METRICS_LISTEN)

clean:
	rm -rf $(BUILD_DIR)
