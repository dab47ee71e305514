"""Joins nvidia-smi samples (csv: timestamp in local time, SM clock MHz, power W, active clock-event bitmask) with
timing windows ("<label> window=t0-t1" lines on stdin): median clock and power per window, and the
share of samples with the software power cap (bit 0x4) active."""
import datetime, statistics, sys

samples = []
for line in open(sys.argv[1]):
    parts = [p.strip() for p in line.split(",")]
    try:
        when = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        samples.append((when, float(parts[1]), float(parts[2]), int(parts[3], 16)))
    except (ValueError, IndexError):
        continue
for line in sys.stdin:
    if "window=" not in line:
        continue
    label, window = line.rsplit("window=", 1)
    t0, t1 = (float(x) for x in window.strip().split("-"))
    # Skip the first 10% of the window (warm-up and clock ramp).
    t0 += 0.1 * (t1 - t0)
    inside = [s for s in samples if t0 <= s[0] <= t1]
    if not inside:
        print(f"{label.strip()}: no samples")
        continue
    clk = statistics.median(s[1] for s in inside)
    pw = statistics.median(s[2] for s in inside)
    cap = sum(1 for s in inside if s[3] & 0x4) / len(inside)
    print(f"{label.strip()}: {len(inside)} samples, SM clock median {clk:.0f} MHz, power median {pw:.0f} W, power cap active {cap:.0%}")
