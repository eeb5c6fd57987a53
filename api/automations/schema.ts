import { z } from 'zod';
import { emailString, nameText, senderName, customIssue, NO_LINE_BREAKS } from '../validation';
import { IdCursor, Limit } from '../contacts/schema';
import { ContactDataInput } from '../track/schema';
import { EventDataFilterSchema, FilterSchema } from '../../domain/filters';
import { EVENT_NAME_RE } from '../../domain/events/event-names';
import { BRANCHES, EXECUTION_STATUSES, STEP_TYPES } from '../../domain/automations/automation.entity';
import { MAX_DURATION_MS, type DurationUnit } from '../../domain/automations/graph';
import { MAX_CUSTOM_HEADERS, MAX_HEADER_VALUE_CHARS, WEBHOOK_HEADER_NAME_PATTERN, WEBHOOK_HEADER_VALUE_PATTERN, webhookHeaderProblems } from '../../domain/automations/webhook';

const Name = nameText(
  200,
  { required: 'name is required', tooLong: 'name is at most 200 characters' },
  z.string({ error: (issue) => (issue.input === undefined ? 'name is required' : 'name must be a string') }),
);
const Description = z.string().max(2000, 'description is at most 2000 characters');

/** Any event name, the service's own included (`contact.subscribed`, `email.open`, `segment.<slug>.entry`, ...). */
const AnyEventName = z
  .string()
  .min(1, 'The event name cannot be empty')
  .max(200, 'Event names are at most 200 characters')
  .regex(EVENT_NAME_RE, 'Event names have no control characters and no surrounding spaces');

const TriggerFilter = EventDataFilterSchema;

const WorkflowFields = {
  description: Description.nullable().optional(),
  triggerType: z.literal('EVENT', { error: 'triggerType is EVENT (the only trigger type)' }).optional(),
  triggerEvent: AnyEventName.nullable().optional().meta({ description: 'The event that starts a run for its contact: a tracked event or a service event (`contact.subscribed`, `email.open`, `segment.<slug>.entry`, ...).' }),
  // A union rather than .nullable(): the component's own JSON Schema (type: object) would hide the null, and a wrapped
  // copy would inline the component instead of referring to it.
  triggerFilter: z
    .union([TriggerFilter, z.null()])
    .optional()
    .meta({ description: 'Only events whose data match start a run (null: every event of the name).' }),
  allowReentry: z.boolean().optional().meta({ description: 'Whether a contact may enter again once its previous run ended (never while one is active). Default false: once per contact.' }),
};

export const CreateWorkflowBody = z
  .object({ name: Name, ...WorkflowFields })
  .meta({ id: 'CreateWorkflowRequest', description: 'Always created with `triggerType` EVENT and `enabled` false.' });

export const UpdateWorkflowBody = z
  .object({
    name: Name.optional(),
    ...WorkflowFields,
    enabled: z.boolean().optional().meta({ description: 'true checks the graph (422 naming every problem) and starts triggering; false stops new runs (runs under way go on).' }),
    entryStepId: z.uuid({ error: 'entryStepId must be a step id (UUID)' }).nullable().optional().meta({ description: 'The first step of every run (the first step added, unless changed).' }),
  })
  .strict()
  .meta({ id: 'UpdateWorkflowRequest' });

export const WorkflowIdParams = z.object({ id: z.uuid({ error: 'Must be a workflow id (UUID)' }) });
export const StepParams = WorkflowIdParams.extend({ stepId: z.uuid({ error: 'Must be a step id (UUID)' }) });
export const TransitionParams = WorkflowIdParams.extend({ transitionId: z.uuid({ error: 'Must be a transition id (UUID)' }) });
export const ExecutionParams = WorkflowIdParams.extend({ executionId: z.uuid({ error: 'Must be an execution id (UUID)' }) });

export const ListWorkflowsQuery = z.object({
  limit: Limit,
  cursor: IdCursor,
  enabled: z.enum(['true', 'false']).transform((v) => v === 'true').optional(),
});

// ---- Step configs: one schema per type ----------------------------------------------------------------------------

const UNITS = ['seconds', 'minutes', 'hours', 'days', 'weeks'] as const satisfies readonly DurationUnit[];

/** Each unit's largest amount: at most 366 days (52 weeks). */
const MAX_AMOUNT: Record<DurationUnit, number> = { seconds: MAX_DURATION_MS / 1000, minutes: MAX_DURATION_MS / 60_000, hours: MAX_DURATION_MS / 3_600_000, days: 366, weeks: 52 };

const Duration = (what: string) =>
  z
    .discriminatedUnion(
      'unit',
      UNITS.map((unit) =>
        z
          .object({
            amount: z.number().int(`${what}.amount is a whole number`).min(1, `${what}.amount is at least 1`).max(MAX_AMOUNT[unit], `${what} is at most ${MAX_AMOUNT[unit]} ${unit}${unit === 'days' ? '' : ' (366 days)'}`),
            unit: z.literal(unit),
          })
          .strict(),
      ) as unknown as [z.ZodObject<{ amount: z.ZodNumber; unit: z.ZodLiteral<DurationUnit> }>],
      { error: `${what}.unit is seconds, minutes, hours, days or weeks` },
    )
    .meta({ description: 'A duration: `{ amount, unit }`, from one second to 366 days (52 weeks).' });

const SendEmailConfig = z
  .object({
    templateId: z.uuid({ error: 'templateId must be a template id (UUID)' }).meta({ description: 'The template to send (its subject, body, sender and type).' }),
    from: emailString.optional().meta({ description: "Overrides the template's sender; must be on a verified domain when the workflow is enabled." }),
    fromName: senderName.optional(),
    replyTo: emailString.optional(),
    subject: z
      .string()
      .min(1)
      .max(998)
      .refine((s) => !/[\r\n]/.test(s), { message: 'subject cannot contain newlines', params: { code: 'invalid_subject' } })
      .optional()
      .meta({ description: "Overrides the template's subject (Liquid).", pattern: NO_LINE_BREAKS }),
    trackOpens: z.boolean().optional().meta({ description: "Absent: the project's setting." }),
    trackClicks: z.boolean().optional().meta({ description: "Absent: the project's setting." }),
  })
  .strict()
  .meta({ id: 'SendEmailStepConfig', description: 'Sends a template to the contact; Liquid sees the contact data and `{{ context.* }}` (the trigger event\'s data, or the manual start\'s context).' });

const DelayConfig = z.object({ duration: Duration('duration') }).strict().meta({ id: 'DelayStepConfig', description: 'Waits (a durable timer).' });

const LABEL = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
const PORT = '(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})';
/** http(s), a host name or IPv4 address (no credentials, no IPv6 literal), an optional port, then anything without spaces. */
export const WEBHOOK_URL = new RegExp(`^[Hh][Tt][Tt][Pp][Ss]?://${LABEL}(?:\\.${LABEL})*\\.?(?::${PORT})?(?:[/?#][^\\s]*)?$`);

const WaitForEventConfig = z
  .object({
    event: AnyEventName.meta({ description: 'The contact event to wait for (recorded after the wait began).' }),
    timeout: Duration('timeout'),
  })
  .strict()
  .meta({ id: 'WaitForEventStepConfig', description: 'Waits for the contact\'s event: the `event` branch when it comes, the `timeout` branch when the timeout passes first.' });

const ConditionConfig = z
  .object({ filter: FilterSchema })
  .strict()
  .meta({ id: 'ConditionStepConfig', description: 'Tests the contact (fields, data, events) with the filter language when the run reaches the step: the `yes` or the `no` branch.' });

const WebhookConfig = z
  .object({
    url: z
      .string()
      .max(2048, 'url is at most 2048 characters')
      .regex(WEBHOOK_URL, 'url must be an http or https URL to a host name or IPv4 address, without credentials')
      .refine((u) => {
        try {
          return Boolean(new URL(u));
        } catch {
          return false;
        }
      }, { message: 'url is not a valid URL (a host that ends in a number must be an IPv4 address)', params: { code: 'invalid_url' } })
      .meta({ description: 'http(s) URL; private, loopback and link-local addresses are refused when called unless WEBHOOK_ALLOW_PRIVATE_NETWORKS.' }),
    headers: z
      .record(z.string().regex(new RegExp(WEBHOOK_HEADER_NAME_PATTERN), 'not a header name a step may set'), z.string().max(MAX_HEADER_VALUE_CHARS).regex(new RegExp(WEBHOOK_HEADER_VALUE_PATTERN), 'the value must be printable ASCII, without line breaks'))
      .optional()
      .superRefine((h, ctx) => {
        for (const p of webhookHeaderProblems(h ?? {})) customIssue(ctx, p.message, 'invalid_header', p.header ? [p.header] : []);
      })
      .meta({
        description: `Extra request headers (e.g. Authorization): at most ${MAX_CUSTOM_HEADERS}, HTTP token names, printable ASCII values, none of the reserved ones (README › WEBHOOK steps); a name given twice in other case is refused.`,
        maxProperties: MAX_CUSTOM_HEADERS,
        propertyNames: { pattern: WEBHOOK_HEADER_NAME_PATTERN },
        additionalProperties: { type: 'string', maxLength: MAX_HEADER_VALUE_CHARS, pattern: WEBHOOK_HEADER_VALUE_PATTERN },
      }),
  })
  .strict()
  .meta({ id: 'WebhookStepConfig', description: 'POSTs the signed JSON payload (README › Workflows › WEBHOOK); retried with backoff.' });

const UpdateContactConfig = z
  .object({
    data: ContactDataInput.optional(),
    subscribed: z.boolean().optional(),
  })
  .strict()
  .meta({ id: 'UpdateContactStepConfig', description: 'Changes the contact by the contact data rules (merge; null deletes a key) and/or its subscription.' });

const ExitConfig = z.object({}).strict().meta({ id: 'ExitStepConfig', description: 'Ends the run.' });

export const STEP_CONFIGS = {
  SEND_EMAIL: SendEmailConfig,
  DELAY: DelayConfig,
  WAIT_FOR_EVENT: WaitForEventConfig,
  CONDITION: ConditionConfig,
  WEBHOOK: WebhookConfig,
  UPDATE_CONTACT: UpdateContactConfig,
  EXIT: ExitConfig,
} as const;

const StepName = z.string().max(200, 'name is at most 200 characters').nullable().optional();

export const CreateStepBody = z
  .discriminatedUnion(
    'type',
    STEP_TYPES.map((type) =>
      z.object({
        type: z.literal(type),
        name: StepName,
        config: type === 'EXIT' ? ExitConfig.default({}) : STEP_CONFIGS[type],
      }),
    ) as unknown as [z.ZodObject<{ type: z.ZodLiteral<(typeof STEP_TYPES)[number]>; name: typeof StepName; config: z.ZodType<Record<string, unknown>> }>],
    { error: `type is one of ${STEP_TYPES.join(', ')}` },
  )
  .meta({ id: 'CreateWorkflowStepRequest', description: 'A step: its `type` and that type\'s `config`.' });

export const UpdateStepBody = z
  .object({
    name: StepName,
    config: z
      .record(z.string(), z.unknown())
      .optional()
      .meta({ description: "The step's whole config, as its type takes it (see the *StepConfig schemas; otherwise 422 `wrong_step_type`)." }),
  })
  .strict()
  .meta({ id: 'UpdateWorkflowStepRequest' });

export const DeleteStepQuery = z.object({
  splice: z.enum(['true', 'false']).transform((v) => v === 'true').optional().meta({ description: 'Reconnect the transitions into the step to its successor.' }),
});

export const CreateTransitionBody = z
  .object({
    fromStepId: z.uuid({ error: 'fromStepId must be a step id (UUID)' }),
    toStepId: z.uuid({ error: 'toStepId must be a step id (UUID)' }),
    branch: z.enum(BRANCHES, { error: 'branch is yes, no (CONDITION), event or timeout (WAIT_FOR_EVENT)' }).nullable().optional(),
  })
  .strict()
  .meta({ id: 'CreateWorkflowTransitionRequest', description: 'CONDITION steps take `branch` yes or no; WAIT_FOR_EVENT steps event or timeout; other steps none.' });

const Context = z.record(z.string(), z.unknown()).optional().meta({ description: 'Per-execution variables: `{{ context.* }}` in SEND_EMAIL templates.' });

export const StartExecutionBody = z
  .union([
    z.object({ contactId: z.uuid({ error: 'contactId must be a contact id (UUID)' }), context: Context }).strict(),
    z.object({ email: emailString, context: Context }).strict(),
  ], { error: 'Give the contact as contactId or as email (one of them), and optionally context' })
  .meta({ id: 'StartWorkflowExecutionRequest', description: 'The contact by `contactId` or by `email` (one of them).' });

export const ListExecutionsQuery = z.object({
  limit: Limit,
  cursor: IdCursor,
  status: z.enum(EXECUTION_STATUSES, { error: `status is one of ${EXECUTION_STATUSES.join(', ')}` }).optional(),
  contactId: z.uuid({ error: 'contactId must be a UUID' }).optional(),
});
