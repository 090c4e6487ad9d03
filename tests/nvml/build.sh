#!/bin/sh
# Build the NVML stand-in (tests only): tests/nvml/build.sh OUT_DIR
# prints the path of the built libnvidia-ml-standin.so.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build.sh OUT_DIR}
mkdir -p "$out"
lib="$out/libnvidia-ml-standin.so"
if [ ! -e "$lib" ] || [ "$here/standin.c" -nt "$lib" ]; then
	${CC:-cc} -std=c11 -D_POSIX_C_SOURCE=200809L -O1 -Wall -Wextra -Werror -shared -fPIC \
		-o "$lib.tmp.$$" "$here/standin.c" -lm
	mv "$lib.tmp.$$" "$lib"
fi
echo "$lib"
