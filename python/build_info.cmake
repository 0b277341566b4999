# Writes kiln/_build_info.py: the SHA-256 of the compiler extension just built, which keys the disk cache, so a
# rebuilt compiler never reads programs an older one wrote (kiln/cache.py).
file(SHA256 ${SO} hash)
file(WRITE ${OUT} "\"\"\"Written by the build: the compiler this package was built with (keys kiln/cache.py).\"\"\"\nCOMPILER_ID = \"${hash}\"\n")
