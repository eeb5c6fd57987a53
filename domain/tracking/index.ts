/** Open/click tracking and the signed subscription links (see links.ts, tokens.ts, tracking.service.ts). */
export { applyTracking, contactLinks, listUnsubscribeHeaders, PUBLIC_PATHS, type ContactLinks, type LinkConfig, type TrackingOptions } from './links';
export { LinkTokens, linkTokens, MAX_TOKEN_CHARS, type TokenKind, type TokenPayload } from './tokens';
export { recordOpen, recordClick, findSubscription, changeSubscription, type SubscriptionView } from './tracking.service';
