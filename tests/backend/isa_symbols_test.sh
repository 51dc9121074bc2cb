#!/usr/bin/env bash
# The translation units compiled for one instruction set (kernels_avx2*.cc, kernels_avx512*.cc)
# must not define weak (inline or template) functions: the linker keeps one copy of such a
# symbol for the whole program, so an inline helper shared through a header would run one
# unit's build everywhere, AVX-512 instructions on an AVX2-only CPU included. Their helpers
# belong in unnamed namespaces. Weak data (constants) carries no instructions and is allowed.
#   isa_symbols_test.sh OBJECT...   (the backend library's objects; the ISA units are picked out)
set -euo pipefail
checked=0
bad=0
for obj in "$@"; do
  case "$(basename "$obj")" in
    kernels_avx2*.o | kernels_avx512*.o) ;;
    *) continue ;;
  esac
  checked=$((checked + 1))
  weak=$(nm --defined-only "$obj" | awk '$2 == "W" { print $3 }')
  if [[ -n "$weak" ]]; then
    echo "FAIL: $(basename "$obj") defines weak functions (shared across ISA units by the linker):"
    echo "$weak" | c++filt | sed 's/^/  /'
    bad=1
  fi
done
if [[ $checked -lt 3 ]]; then
  echo "FAIL: expected the AVX2 and AVX-512 kernel objects among the arguments, found $checked"
  exit 1
fi
if [[ $bad -ne 0 ]]; then exit 1; fi
echo "ok: $checked ISA units define no weak functions"
