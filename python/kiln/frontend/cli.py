"""kiln-import: an ONNX model to kiln IR on the command line.

    kiln-import model.onnx -o model.mlir [--weights=constants|arguments]

Errors (a missing or corrupt file, unsupported operators, shape mismatches, an output that cannot be written)
are one line on stderr naming the file, input or node, and exit status 1.
"""

import argparse
import sys

from .onnx_import import import_onnx
from .values import FrontendError


def main(argv=None):
    parser = argparse.ArgumentParser(prog="kiln-import", description="Import an ONNX model as kiln IR.")
    parser.add_argument("model", help="the .onnx file")
    parser.add_argument("-o", "--output", default="-", help="where to write the kiln IR (default: stdout)")
    parser.add_argument("--weights", choices=("constants", "arguments"), default="constants",
                        help="initializers as kiln.constant (default) or as function arguments after the inputs")
    parser.add_argument("--name", default="main", help="name of the function (default: main)")
    args = parser.parse_args(argv)
    try:
        text = import_onnx(args.model, weights=args.weights, name=args.name).text
    except (FrontendError, ValueError) as error:
        print(f"kiln-import: error: {error}", file=sys.stderr)
        return 1
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    try:
        with open(args.output, "w") as out:
            out.write(text)
    except OSError as error:  # a missing folder, a directory, no permission, a full disk
        print(f"kiln-import: error: cannot write {args.output}: {error.strerror or error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
