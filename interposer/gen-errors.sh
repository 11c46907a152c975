#!/bin/sh
# gen-errors.sh CUDA_H: prints a C table of CUresult names from cuda.h.
echo '/* Generated from cuda.h by interposer/gen-errors.sh: do not edit. */'
echo '#include <cuda.h>'
echo 'const char *error_name(CUresult err)'
echo '{'
echo '	switch ((int)err) {'
sed -n '/^typedef enum cudaError_enum/,/^} CUresult;/p' "$1" |
	sed -n 's/^ *\(CUDA_[A-Z0-9_]*\) *= *\([0-9]*\),\{0,1\}.*/\1 \2/p' |
	sort -t' ' -k2,2n -u |
	awk '{ printf "\tcase %s: return \"%s\";\n", $2, $1 }'
echo '	default: return 0;'
echo '	}'
echo '}'
