/**
 * Preloaded (`node --import`) into a process whose wall clock must be off by CLOCK_SKEW_MS, for
 * the clock-skew tests: Date.now() and `new Date()` read the shifted time; the monotonic clock
 * (performance.now, timers) is untouched, as on a host whose NTP drifted.
 */
const skewMs = Number(process.env.CLOCK_SKEW_MS ?? 0);
const RealDate = Date;
const realNow = RealDate.now.bind(RealDate);

class SkewedDate extends RealDate {
  constructor(...args: unknown[]) {
    if (args.length === 0) super(realNow() + skewMs);
    else super(...(args as [string | number | Date]));
  }

  static override now(): number {
    return realNow() + skewMs;
  }
}

globalThis.Date = SkewedDate as DateConstructor;
