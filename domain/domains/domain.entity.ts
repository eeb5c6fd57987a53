import { defineEntity, p, type InferEntity } from '@mikro-orm/core';
import { Project } from '../projects/project.entity';
import { uuidv7 } from '../ids';
import type { DomainRecord } from './dns-records';

const DOMAIN_STATUSES = ['PENDING', 'VERIFIED'] as const;
export type DomainStatus = (typeof DOMAIN_STATUSES)[number];

/**
 * A sender domain. Mail may only be sent from an address on a VERIFIED domain of the project, and a domain name is
 * VERIFIED in at most one project (partial unique index).
 */
export const Domain = defineEntity({
  name: 'Domain',
  tableName: 'domains',
  uniques: [
    { properties: ['project', 'name'] },
    {
      name: 'domains_name_verified_unique',
      expression: `create unique index "domains_name_verified_unique" on "domains" ("name") where "status" = 'VERIFIED'`,
    },
  ],
  properties: {
    id: p.uuid().primary().onCreate(() => uuidv7()),
    project: () => p.manyToOne(Project).deleteRule('cascade').index(),
    /** Lowercased, without a trailing dot. */
    name: p.string().length(253).index(),
    status: p.enum([...DOMAIN_STATUSES]).default('PENDING'),
    verifiedAt: p.datetime().nullable(),
    /** DKIM selector (`mw-xxxxxxxx`); null for domains added without a key (the dev seed). */
    dkimSelector: p.string().length(63).nullable(),
    /** Base64 DER public key: the `p=` of the DKIM record. */
    dkimPublicKey: p.text().nullable(),
    /** PKCS#8 PEM private key sealed with SecretBox (AES-256-GCM, key from APP_SECRET). Never presented. */
    dkimPrivateKey: p.text().nullable(),
    /** The ownership TXT value (`mailwright-verification=...`). */
    verificationToken: p.string().length(100).nullable(),
    /** The DNS records to create, each with its status at the last check. */
    records: p.json<DomainRecord[]>().default('[]'),
    lastCheckedAt: p.datetime().nullable(),
    /**
     * The bounce host whose MX the last checks found naming the inbound server (decideReturnPath): mail from the
     * domain then has `b-<token>@<this host>` as its envelope sender. Null: NOT_CONFIGURED, the From address is.
     */
    returnPathHost: p.string().length(253).nullable(),
    /** Since when a required record of this VERIFIED domain has been missing (see decideDomainState). */
    failingSince: p.datetime().nullable(),
    statusReason: p.text().nullable(),
    createdAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()),
    updatedAt: p.datetime().defaultRaw('now()').onCreate(() => new Date()).onUpdate(() => new Date()),
  },
});
export type Domain = InferEntity<typeof Domain>;
