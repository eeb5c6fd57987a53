import { z } from 'zod';
import type { Routes } from '../route';
import type { ApiDeps } from '../context';
import { CreateDomainBody, ProjectIdParams } from './schema';
import { IdParams, errorResponses } from '../common.schema';
import { DomainSchema, presentDomain } from '../presenters/domain.presenter';
import { addDomain, listDomains, removeDomain, returnPathSettings, verifyDomainNow } from '../../domain/domains/domain.service';
import { SecretBox } from '../../domain/domains/secret-box';
import { notFound } from '../../domain/errors';

export function domainRoutes(routes: Routes, deps: ApiDeps): void {
  const secretBox = new SecretBox(deps.config.appSecret);
  const runner = deps.temporal;
  const returnPath = returnPathSettings(deps.config);
  const present = (domain: Parameters<typeof presentDomain>[0]) => presentDomain(domain, returnPath);

  routes.add({
    method: 'get',
    path: '/domains/project/:projectId',
    summary: "The project's sender domains, verified and pending",
    description: 'The project id must be the one of the API key (another id is 404). Oldest first.',
    tags: ['Domains'],
    auth: 'secret',
    params: ProjectIdParams,
    responses: { 200: { description: 'Domains with their DNS records', schema: z.array(DomainSchema) }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => {
      const { projectId } = principal;
      if (params.projectId !== projectId) throw notFound('Project');
      return { body: (await listDomains(ctx.state.em, projectId)).map(present) };
    },
  });

  routes.add({
    method: 'post',
    path: '/domains',
    summary: 'Add a sender domain; returns the DNS records to create',
    description:
      'Generates a DKIM key (RSA, 2048 bits unless the server sets DKIM_KEY_BITS=1024) and an ownership token and starts the verification loop, which checks the DNS ' +
      'every 5 minutes (DOMAIN_CHECK_INTERVAL) until the required records (OWNERSHIP and DKIM) are found, then re-checks ' +
      'the verified domain every 6 hours (DOMAIN_RECHECK_INTERVAL). SPF, DMARC and the bounce host\'s MX and SPF are recommended and ' +
      'reported, not required; with the bounce host\'s MX in place the domain\'s returnPath is ACTIVE and its mail gets a signed envelope ' +
      'sender per email on that host (bounces and complaints come back), without it mail keeps the From address as envelope sender. 409 DOMAIN_EXISTS when the project has the domain already, 409 DOMAIN_TAKEN when another project has ' +
      'verified it.',
    tags: ['Domains'],
    auth: 'secret',
    ownTransactions: 'Stores and starts its workflow as one unit (persistThenStart): the row commits before the start',
    body: CreateDomainBody,
    responses: { 201: { description: 'The domain (PENDING) and its records', schema: DomainSchema }, ...errorResponses(400, 401, 409, 422, 503) },
    handler: async ({ ctx, body, principal }) => {
      const domain = await addDomain(
        ctx.state.em,
        { runner, secretBox, spfInclude: deps.config.domains.spfInclude, dkimKeyBits: deps.config.domains.dkimKeyBits, returnPath },
        { projectId: principal.projectId, name: body.domain },
      );
      return { status: 201, body: present(domain) };
    },
  });

  routes.add({
    method: 'get',
    path: '/domains/:id/verify',
    summary: 'Check the DNS records now',
    description: "Runs a check at once in the domain's verification workflow and returns the domain with each record's fresh status.",
    tags: ['Domains'],
    auth: 'secret',
    params: IdParams,
    responses: { 200: { description: 'The domain after the check', schema: DomainSchema }, ...errorResponses(401, 404, 422, 503) },
    handler: async ({ ctx, params, principal }) => ({
      body: present(await verifyDomainNow(ctx.state.em, runner, principal.projectId, params.id)),
    }),
  });

  routes.add({
    method: 'delete',
    path: '/domains/:id',
    summary: 'Remove the domain',
    description: 'Mail can no longer be sent from it, and its verification workflow ends.',
    tags: ['Domains'],
    auth: 'secret',
    ownTransactions: 'Deletes the domain, then ends its verification workflow: the workflow must find the row gone',
    params: IdParams,
    responses: { 204: { description: 'Removed' }, ...errorResponses(401, 404, 422) },
    handler: async ({ ctx, params, principal }) => {
      await removeDomain(ctx.state.em, runner, principal.projectId, params.id);
      return {};
    },
  });
}
