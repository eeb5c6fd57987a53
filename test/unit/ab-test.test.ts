import { decideWinner, shareProblem, testShareSize, twoProportionZTest, withPreheader, type AbTest } from '../../domain/campaigns/ab-test';

const test2 = (testShare: AbTest['testShare'], variants = 2): AbTest => ({
  variants: Array.from({ length: variants }, () => ({})),
  testShare,
  metric: 'unique_opens',
  testDurationSeconds: 60,
  afterTest: 'auto',
});

describe('A/B test shares', () => {
  test.each([
    [{ percent: 10 }, 1000, 100],
    [{ percent: 10 }, 1009, 100],
    [{ percent: 12.5 }, 80, 10],
    [{ count: 7 }, 1000, 7],
  ] as const)('share %j of an audience of %i is %i per variant (percent rounds down)', (share, audience, each) => {
    expect(testShareSize({ testShare: share }, audience)).toBe(each);
  });

  test('an audience too small for the shares is refused: a variant would get nobody, or nobody would be left for the winner', () => {
    expect(shareProblem(test2({ percent: 10 }), 9)).toMatchObject({ field: 'abTest.testShare', code: 'audience_too_small' });
    expect(shareProblem(test2({ count: 5 }), 10)).toMatchObject({ code: 'audience_too_small' });
    expect(shareProblem(test2({ count: 5 }), 11)).toBeNull();
    expect(shareProblem(test2({ percent: 10 }), 10)).toBeNull();
  });
});

describe('two-proportion z-test (pooled)', () => {
  test('matches the textbook value: 60/500 against 40/500 gives z 2.108, p 0.035', () => {
    const { z, pValue } = twoProportionZTest(60, 500, 40, 500);
    expect(z).toBeCloseTo(2.108, 2);
    expect(pValue).toBeCloseTo(0.035, 3);
  });

  test('equal proportions give p 1; no variance or an empty sample gives no test', () => {
    expect(twoProportionZTest(10, 100, 10, 100).pValue).toBeCloseTo(1, 4);
    expect(twoProportionZTest(0, 100, 0, 100)).toEqual({ z: null, pValue: null });
    expect(twoProportionZTest(3, 0, 1, 10)).toEqual({ z: null, pValue: null });
  });
});

describe('the winner of an A/B test', () => {
  test('the best value of the metric wins, and a large difference is significant', () => {
    const d = decideWinner({ metric: 'unique_opens', samples: [{ sent: 500, opens: 40, clicks: 0 }, { sent: 500, opens: 90, clicks: 0 }] });
    expect(d).toMatchObject({ winner: 1, winnerLabel: 'B', decidedBy: 'auto', tie: false, noData: false, withinNoise: false });
    expect(d.variants.map((v) => [v.successes, v.trials, v.value])).toEqual([
      [40, 500, 0.08],
      [90, 500, 0.18],
    ]);
    expect(d.pValue).toBeLessThan(0.001);
    expect(d.note).toMatch(/Significant/);
  });

  test('a small difference wins but is reported within noise (p >= 0.05)', () => {
    const d = decideWinner({ metric: 'unique_clicks', samples: [{ sent: 50, opens: 20, clicks: 5 }, { sent: 50, opens: 20, clicks: 6 }] });
    expect(d).toMatchObject({ winner: 1, withinNoise: true });
    expect(d.note).toMatch(/Within noise/);
  });

  test('click-to-open is clicks per open: fewer clicks on fewer opens can win', () => {
    const d = decideWinner({ metric: 'click_to_open', samples: [{ sent: 100, opens: 50, clicks: 10 }, { sent: 100, opens: 10, clicks: 5 }] });
    expect(d.winner).toBe(1);
    expect(d.variants[1]).toMatchObject({ successes: 5, trials: 10, value: 0.5 });
  });

  test('a tie goes to the lowest variant, flagged', () => {
    const d = decideWinner({ metric: 'unique_opens', samples: [{ sent: 10, opens: 2, clicks: 0 }, { sent: 20, opens: 6, clicks: 0 }, { sent: 10, opens: 3, clicks: 0 }] });
    expect(d).toMatchObject({ winner: 1, tie: true });
    expect(d.note).toMatch(/Tie/);
  });

  test('no opens at all sends variant A, flagged, within noise', () => {
    const d = decideWinner({ metric: 'unique_opens', samples: [{ sent: 10, opens: 0, clicks: 0 }, { sent: 10, opens: 0, clicks: 0 }] });
    expect(d).toMatchObject({ winner: 0, noData: true, tie: false, withinNoise: true, pValue: null });
  });

  test("a person's pick wins whatever the numbers, which are still reported", () => {
    const d = decideWinner({ metric: 'unique_opens', samples: [{ sent: 10, opens: 9, clicks: 0 }, { sent: 10, opens: 1, clicks: 0 }], pick: 1 });
    expect(d).toMatchObject({ winner: 1, decidedBy: 'manual' });
    expect(d.variants[0]!.value).toBe(0.9);
  });
});

describe('preheader', () => {
  test('a hidden first line of an HTML body, escaped; inside mj-body for MJML; none leaves the body alone', () => {
    expect(withPreheader('<p>x</p>', 'Save <20%>')).toBe('<div style="display:none;max-height:0;overflow:hidden;mso-hide:all">Save &lt;20%&gt;</div><p>x</p>');
    expect(withPreheader('<mjml><mj-body width="600px"><mj-section/></mj-body></mjml>', 'Hi')).toMatch(/^<mjml><mj-body width="600px"><mj-raw><div[^>]*>Hi<\/div><\/mj-raw><mj-section/);
    expect(withPreheader('<p>x</p>', null)).toBe('<p>x</p>');
  });
});
