"""Why the hook reads at most 64 KiB and refuses lines with over 256 dots:
the time tomllib (or tomli) takes on adversarial but valid TOML, and the time
the hook's own parse takes on the same input.

    python benchmarks/toml_limits.py
"""

from __future__ import annotations

import sys
import time

from _venvs import ROOT, machine

sys.path.insert(0, str(ROOT))

from rocm_hwq_autoset._errors import ConfigError
from rocm_hwq_autoset._files import MAX_CONFIG_BYTES
from rocm_hwq_autoset._toml import parse_toml, tomllib


def fill(unit: str, size: int) -> str:
    text = "".join(unit.format(i) for i in range(size // max(len(unit), 1) + 1))
    return text[: text.rfind("\n", 0, size) + 1]


def cases(size: int) -> dict[str, str]:
    deep = ".".join(["k"] * 250)
    return {
        "many tables": fill("[t{}]\nx = 1\n", size),
        "array of tables": fill("[[a]]\nx = {}\n", size),
        "headers 250 keys deep": fill("[t{}." + deep + "]\n", size),
        "big array": "a = [" + ", ".join(["1"] * (size // 3 - 4)) + "]\n",
        "one dotted key, 20k deep": ".".join(["k"] * 20_000) + " = 1\n",
    }


def timed(func: object, text: str) -> str:
    start = time.perf_counter()
    try:
        func(text)  # type: ignore[operator]
        outcome = "parsed"
    except ConfigError as exc:
        outcome = f"refused: {str(exc)[:34]}"
    except Exception as exc:
        outcome = type(exc).__name__
    return f"{time.perf_counter() - start:7.3f} s  {outcome}"


def main() -> None:
    print(f"machine: {machine()}; parser {tomllib.__name__}")
    for size in (MAX_CONFIG_BYTES, 1 << 20):
        print(f"\n{size >> 10} KiB of TOML")
        for name, text in cases(size).items():
            print(f"  {name:<26} {tomllib.__name__}.loads {timed(tomllib.loads, text)}")
            print(f"  {'':<26} parse_toml   {timed(parse_toml, text.encode())}")


if __name__ == "__main__":
    main()
