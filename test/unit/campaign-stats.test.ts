import { campaignRates, uuidv7Floor, type CampaignCounters } from '../../domain/campaigns/campaign-stats';
import { presentCampaignStats, CampaignStatsSchema } from '../../api/presenters/campaign-stats.presenter';
import { randomBytes } from 'node:crypto';
import { uuidv7 } from '../../domain/ids';

const ZERO: CampaignCounters = {
  audience: 0,
  sent: 0,
  delivered: 0,
  openedUnique: 0,
  openedTotal: 0,
  clickedUnique: 0,
  clickedTotal: 0,
  bounced: 0,
  complained: 0,
  unsubscribed: 0,
  failed: 0,
  skipped: 0,
};
const counters = (over: Partial<CampaignCounters>): CampaignCounters => ({ ...ZERO, ...over });

describe('campaign rates', () => {
  test('every rate is per message sent, except click-to-open (unique clicks per unique open)', () => {
    const rates = campaignRates(counters({ audience: 1200, sent: 1000, delivered: 950, openedUnique: 400, openedTotal: 900, clickedUnique: 100, clickedTotal: 130, bounced: 30, complained: 2, unsubscribed: 7 }));
    expect(rates).toEqual({
      deliveryRate: 0.95,
      openRate: 0.4,
      clickRate: 0.1,
      clickToOpenRate: 0.25,
      bounceRate: 0.03,
      complaintRate: 0.002,
      unsubscribeRate: 0.007,
    });
  });

  test('totals, audience, failures and skips move no rate', () => {
    const base = counters({ sent: 10, openedUnique: 5, clickedUnique: 2 });
    expect(campaignRates({ ...base, audience: 99, openedTotal: 50, clickedTotal: 40, failed: 3, skipped: 4 })).toEqual(campaignRates(base));
  });

  test('a zero denominator gives 0, never NaN or Infinity (a draft, or opens without sends yet)', () => {
    expect(Object.values(campaignRates(ZERO))).toEqual([0, 0, 0, 0, 0, 0, 0]);
    expect(campaignRates(counters({ openedUnique: 3, clickedUnique: 2, bounced: 1 }))).toMatchObject({ openRate: 0, clickRate: 0, bounceRate: 0, clickToOpenRate: 0.6667 });
    expect(campaignRates(counters({ sent: 4, clickedUnique: 1 })).clickToOpenRate).toBe(0);
  });

  test('rates are rounded to 4 decimals, half away from zero as Math.round does for positives', () => {
    const r = campaignRates(counters({ sent: 3, delivered: 1, openedUnique: 2, clickedUnique: 1, bounced: 1, unsubscribed: 1 }));
    expect(r).toMatchObject({ deliveryRate: 0.3333, openRate: 0.6667, clickRate: 0.3333, clickToOpenRate: 0.5 });
    expect(campaignRates(counters({ sent: 20_000, openedUnique: 1 })).openRate).toBe(0.0001); // 0.00005 rounds up
    expect(campaignRates(counters({ sent: 30_000, openedUnique: 1 })).openRate).toBe(0); // 0.0000333 rounds down
  });

  test('click-to-open can exceed 1: readers whose client blocks the pixel still click', () => {
    expect(campaignRates(counters({ sent: 10, openedUnique: 2, clickedUnique: 3 })).clickToOpenRate).toBe(1.5);
  });
});

describe('campaign stats presenter', () => {
  test('the response matches CampaignStatsSchema, with updatedAt as ISO or null', () => {
    const c = counters({ audience: 3, sent: 2, openedUnique: 1, openedTotal: 2 });
    const at = new Date('2026-11-24T10:00:00.123Z');
    const body = presentCampaignStats({ campaignId: uuidv7(), ...c, ...campaignRates(c), updatedAt: at });
    expect(CampaignStatsSchema.parse(body)).toEqual(body);
    expect(body).toMatchObject({ openRate: 0.5, openedTotal: 2, updatedAt: '2026-11-24T10:00:00.123Z' });
    const draft = presentCampaignStats({ campaignId: uuidv7(), ...ZERO, ...campaignRates(ZERO), updatedAt: null });
    expect(CampaignStatsSchema.parse(draft).updatedAt).toBeNull();
  });
});

describe('receipt pruning boundary', () => {
  /** A UUIDv7 of millisecond `ms` with random other bits (uuidv7() itself never goes back in time within a process). */
  const v7At = (ms: number) => {
    const h = ms.toString(16).padStart(12, '0') + randomBytes(10).toString('hex');
    const variant = ((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16);
    return `${h.slice(0, 8)}-${h.slice(8, 12)}-7${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
  };

  test('uuidv7Floor(t) sorts (as Postgres compares uuids: bytewise) above every UUIDv7 made before t and at or below every one from t on', () => {
    const t = Date.UTC(2026, 10, 24, 12, 0, 0);
    const floor = uuidv7Floor(t);
    expect(floor).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7000-8000-000000000000$/);
    for (let i = 0; i < 500; i++) {
      expect(v7At(t - 1 - i * 997) < floor).toBe(true);
      expect(v7At(t + i * 997) >= floor).toBe(true);
    }
    expect(uuidv7() > uuidv7Floor(Date.now() - 1)).toBe(true);
  });
});
