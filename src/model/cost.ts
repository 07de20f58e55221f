// Cost as people read it. Prices are per hour in the unit of the configured instance types' prices (no
// currency is assumed); small amounts keep enough digits to tell them apart.
export function formatMoney(x: number): string {
  const a = Math.abs(x);
  if (a >= 1) return x.toFixed(2);
  if (a >= 0.01 || a === 0) return x.toFixed(4);
  return x.toFixed(6);
}

/** Midnight UTC of the day of `now`: "today" for `berth cost --since today` and the dashboard. */
export function startOfDayUtc(now: Date): Date {
  return new Date(Math.floor(now.getTime() / 86_400_000) * 86_400_000);
}
