import { defineSearchAttributeKey } from '@temporalio/common';

/**
 * Search attributes every Mailwright workflow may carry, so an operator can find executions in Temporal Web UI
 * (e.g. `ProjectId = "..."`). The dev server registers them at start; a production cluster needs them created
 * once (`temporal operator search-attribute create`, see README).
 */
export const SA = {
  ProjectId: defineSearchAttributeKey('ProjectId', 'KEYWORD'),
  ContactId: defineSearchAttributeKey('ContactId', 'KEYWORD'),
  CampaignId: defineSearchAttributeKey('CampaignId', 'KEYWORD'),
  AutomationId: defineSearchAttributeKey('AutomationId', 'KEYWORD'),
  DomainId: defineSearchAttributeKey('DomainId', 'KEYWORD'),
  JobId: defineSearchAttributeKey('JobId', 'KEYWORD'),
  EmailIds: defineSearchAttributeKey('EmailIds', 'KEYWORD_LIST'),
} as const;

/** `--search-attribute` values for the CLI (`Name=Type`). */
export const SEARCH_ATTRIBUTE_CLI_ARGS = Object.values(SA).map(
  (k) => `${k.name}=${k.type === 'KEYWORD_LIST' ? 'KeywordList' : 'Keyword'}`,
);
