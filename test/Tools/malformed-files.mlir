// Whole input files that are not valid MLIR: each must give one located error and a non-zero exit, never a crash
// (`not` without --crash fails on a signal). The inputs live in Inputs/ with a .txt suffix so lit does not run
// them as tests.

// Text that is not MLIR at all.
// RUN: not kiln-opt %S/Inputs/garbage.txt -o /dev/null 2>&1 | FileCheck %s --check-prefix=GARBAGE --implicit-check-not=error:
// GARBAGE: Inputs{{[/\\]}}garbage.txt:1:1: error: custom op 'this' is unknown

// Binary bytes (an ELF header).
// RUN: not kiln-opt %S/Inputs/binary.txt -o /dev/null 2>&1 | FileCheck %s --check-prefix=BINARY --implicit-check-not=error:
// BINARY: Inputs{{[/\\]}}binary.txt:1:1: error: unexpected character

// A file cut in the middle of an op's type list.
// RUN: not kiln-opt %S/Inputs/truncated.txt -o /dev/null 2>&1 | FileCheck %s --check-prefix=TRUNCATED --implicit-check-not=error:
// TRUNCATED: Inputs{{[/\\]}}truncated.txt:3:{{[0-9]+}}: error: expected non-function type

// A file cut in the middle of a dense literal.
// RUN: not kiln-opt %S/Inputs/truncated-attr.txt -o /dev/null 2>&1 | FileCheck %s --check-prefix=ATTR --implicit-check-not=error:
// ATTR: Inputs{{[/\\]}}truncated-attr.txt:2:40: error: expected ']'

// A function whose closing brace is missing.
// RUN: not kiln-opt %S/Inputs/truncated-region.txt -o /dev/null 2>&1 | FileCheck %s --check-prefix=REGION --implicit-check-not=error:
// REGION: Inputs{{[/\\]}}truncated-region.txt:3:{{[0-9]+}}: error: expected operation name in quotes

// A generic op name whose string never ends.
// RUN: not kiln-opt %S/Inputs/unterminated-string.txt -o /dev/null 2>&1 | FileCheck %s --check-prefix=STRING --implicit-check-not=error:
// STRING: Inputs{{[/\\]}}unterminated-string.txt:2:17: error: expected '"' in string literal

// An input file that does not exist.
// RUN: not kiln-opt %S/Inputs/does-not-exist.txt -o /dev/null 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: cannot open input file '{{.*}}does-not-exist.txt'
