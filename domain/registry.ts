import type { Config } from './config';
import { usageRegistry } from './usage/usage-registry';
import { segmentDeletionGuards } from './segments/segment-guards';
import { registerSegmentUsage } from './segments/segment-usage';
import { registerTemplateUsage } from './templates/template-usage';
import { registerCampaignUsage } from './campaigns/campaign-usage';
import { EventConsumerRegistry } from './events/event-consumer';
import { probeConsumer } from './events/event-probe';
import { campaignStatsConsumer } from './campaigns/campaign-stats';
import { analyticsConsumer } from './analytics/analytics-consumer';
import { createAutomationConsumer, type AutomationTriggerControl } from './automations/automation-consumer';
import { registerAutomationUsage } from './automations/automation-usage';
import { createWebhookOutConsumer, type WebhookDeliveryControl } from './webhook-endpoints/webhook-out-consumer';

/**
 * Everything features plug into each other, built once at start-up by the API (api/server.ts) and the worker
 * (temporal/worker.ts) alike, so both processes know the same finders, guards and consumers. A new feature adds
 * its registrations to `buildRegistry`, never from an HTTP module.
 */
export interface Registry {
  /** What references contact fields, event names and templates (usage endpoints, the template delete guard). */
  readonly usage: typeof usageRegistry;
  /** What may refuse the deletion of a segment (active campaigns sending to it). */
  readonly segmentGuards: typeof segmentDeletionGuards;
  /** Who receives recorded events through the outbox; the worker's dispatcher delivers to these. */
  readonly consumers: EventConsumerRegistry;
}

let built: Registry | undefined;

/** Builds the process's registry (once; later calls return the same one). */
export function buildRegistry(
  cfg: Pick<Config, 'events'>,
  deps: {
    /** The Temporal client the automations consumer starts and signals runs with (the worker's; the API dispatches nothing). */
    automationControl?: () => Promise<AutomationTriggerControl>;
    /** The Temporal client the webhooks-out consumer starts delivery batches with (the worker's). */
    webhookControl?: () => Promise<WebhookDeliveryControl>;
  } = {},
): Registry {
  if (built) return built;
  registerSegmentUsage();
  registerTemplateUsage();
  registerCampaignUsage();
  registerAutomationUsage();
  const consumers = new EventConsumerRegistry();
  consumers.register(campaignStatsConsumer);
  consumers.register(analyticsConsumer);
  consumers.register(
    createAutomationConsumer(
      deps.automationControl ??
        (() => Promise.reject(new Error('This process has no Temporal client for automations (only the worker dispatches events)'))),
    ),
  );
  consumers.register(
    createWebhookOutConsumer(deps.webhookControl ?? (() => Promise.reject(new Error('This process has no Temporal client for webhook deliveries (only the worker dispatches events)')))),
  );
  if (cfg.events.probe) consumers.register(probeConsumer);
  built = { usage: usageRegistry, segmentGuards: segmentDeletionGuards, consumers };
  return built;
}
