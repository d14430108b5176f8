"""Why the hook reads at most 256 KiB and refuses lines with over 256 dots:
the CPU time tomllib (or tomli) takes on adversarial but valid TOML, and the time
the hook's own parse takes on the same input.

    python benchmarks/toml_limits.py [--quick]

``--quick``: 4 and 16 KiB of TOML, a dotted key 2,000 deep.
"""

from __future__ import annotations

import argparse
import sys
import time

from _venvs import ROOT, machine

sys.path.insert(0, str(ROOT))  # this checkout's package, installed or not

from rocm_hwq_autoset._config import (
    MAX_CONFIG_BYTES,
    MAX_DOTS_PER_LINE,
    ConfigError,
    parse_toml,
)

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def fill(unit: str, size: int) -> str:
    text = "".join(unit.format(i) for i in range(size // max(len(unit), 1) + 1))
    return text[: text.rfind("\n", 0, size) + 1]


def cases(size: int, depth: int) -> dict[str, str]:
    deep = ".".join(["k"] * (MAX_DOTS_PER_LINE - 6))  # just under the guard
    return {
        "many tables": fill("[t{}]\nx = 1\n", size),
        "array of tables": fill("[[a]]\nx = {}\n", size),
        f"headers {MAX_DOTS_PER_LINE - 5} keys deep": fill(
            "[t{}." + deep + "]\n", size
        ),
        "big array": "a = [" + ", ".join(["1"] * (size // 3 - 4)) + "]\n",
        f"one dotted key, {depth:,} deep": ".".join(["k"] * depth) + " = 1\n",
    }


def timed(func: object, text: str | bytes) -> str:
    start = time.process_time()  # CPU time: the machine's load does not count
    try:
        func(text)  # type: ignore[operator]
        outcome = "parsed"
    except ConfigError as exc:
        outcome = f"refused: {str(exc)[:60]}"
    except Exception as exc:
        outcome = type(exc).__name__
    return f"{time.process_time() - start:7.3f} s  {outcome}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small inputs")
    args = parser.parse_args()
    sizes, depth = ((4 << 10, 16 << 10), 2_000) if args.quick else (
        (MAX_CONFIG_BYTES, 1 << 20), 20_000)  # fmt: skip
    print(f"machine: {machine()}; parser {tomllib.__name__}")
    print(f"the hook's limits: {MAX_CONFIG_BYTES >> 10} KiB,"
          f" {MAX_DOTS_PER_LINE} dots a line")  # fmt: skip
    for size in sizes:
        print(f"\n{size >> 10} KiB of TOML")
        for name, text in cases(size, depth).items():
            loads = f"{tomllib.__name__}.loads"
            print(f"  {name:<27} {loads:<14}{timed(tomllib.loads, text)}")
            print(f"  {'':<27} {'parse_toml':<14}{timed(parse_toml, text.encode())}")


if __name__ == "__main__":
    main()
