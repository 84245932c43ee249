import { median } from '@requester/shared/testing';

/** Runs each variant once per round, `rounds` rounds; prints each variant's per-round ratio to the first. */
export async function compareVariants(
  rounds: number,
  labels: string[],
  run: (variant: number) => Promise<number>,
): Promise<void> {
  const rates = labels.map((): number[] => []);
  for (let round = 1; round <= rounds; round++)
    for (let v = 0; v < labels.length; v++) rates[v]?.push(await run(v));
  const baseRates = rates[0] ?? [];
  for (let v = 1; v < labels.length; v++) {
    const ratios = (rates[v] ?? []).map((rate, i) => rate / (baseRates[i] ?? rate));
    console.log(
      `${labels[v]} / ${labels[0]}: median ${median(rates[v] ?? []).toFixed(0)} / ${median(baseRates).toFixed(0)} tasks/s; ` +
        `per-round ratios ${ratios.map((r) => r.toFixed(2)).join(', ')}; median ratio ${median(ratios).toFixed(2)}`,
    );
  }
}
