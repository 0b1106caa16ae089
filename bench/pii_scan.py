"""Benchmark the ``pii`` detectors and the report redaction on large outputs.

Scans synthetic outputs of ``--kb`` kilobytes (default 100): prose with no findings, and prose
dense with findings (an email, a card number and a phone number every 53 characters, the
worst case of the overlap check), with every category on, best of ``--repeat`` runs. It prints
the time of each in milliseconds; the last line is ``pii_scan_dense_ms=<ms>``.

    python bench/pii_scan.py
    python bench/pii_scan.py --kb 1000 --repeat 3
"""

from __future__ import annotations

import argparse
import time

from worker.security.pii import redact_findings, scan

PROSE = "Thanks for writing in, a colleague will look at order 17 and reply today. "
DENSE = "jane@example.com 4111 1111 1111 1111 +1 415 555 0132 "


def best_ms(text: str, repeat: int) -> tuple[float, int]:
    """Return the fastest scan-and-redact of ``text`` (milliseconds) and its findings."""
    times, found = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        findings = scan(text)
        redact_findings(text, findings)
        times.append((time.perf_counter() - start) * 1000)
        found = len(findings)
    return min(times), found


def main() -> None:
    """Print the scan times of the clean and the dense output."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--kb", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    size = args.kb * 1000
    clean_ms, _ = best_ms((PROSE * (size // len(PROSE) + 1))[:size], args.repeat)
    dense = DENSE * (size // len(DENSE))
    dense_ms, found = best_ms(dense, args.repeat)
    print(f"clean {args.kb} KB: {clean_ms:.1f} ms")
    print(f"dense {args.kb} KB: {dense_ms:.1f} ms, {found} findings")
    print(f"pii_scan_dense_ms={dense_ms:.1f}")


if __name__ == "__main__":
    main()
