import { Client, Connection, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import type { Config } from '../domain/config';
import { SA } from './search-attributes';
import type { emailDelivery } from './workflows';

/**
 * Emails per delivery workflow. Bounded by the EmailIds search attribute (Temporal limits one attribute value to
 * 2 KB by default: 40 ids of 36 characters fit).
 */
export const MAX_DELIVERY_BATCH = 40;

/**
 * The one place that starts, signals and cancels workflows. Workflow ids are derived here from the business ids,
 * so a retry of the same start is recognised ("already started" counts as success).
 */
export class TemporalGateway {
  private constructor(
    readonly client: Client,
    private readonly connection: Connection,
    private readonly taskQueue: string,
  ) {}

  static async connect(cfg: Config['temporal']): Promise<TemporalGateway> {
    const connection = await Connection.connect({ address: cfg.address });
    const client = new Client({ connection, namespace: cfg.namespace });
    return new TemporalGateway(client, connection, cfg.taskQueue);
  }

  static emailDeliveryId(firstEmailId: string): string {
    return `email-delivery/${firstEmailId}`;
  }

  async startEmailDelivery(input: { projectId: string; emailIds: string[] }): Promise<string> {
    const workflowId = TemporalGateway.emailDeliveryId(input.emailIds[0]!);
    try {
      await this.client.workflow.start<typeof emailDelivery>('emailDelivery', {
        taskQueue: this.taskQueue,
        workflowId,
        args: [input],
        typedSearchAttributes: new TypedSearchAttributes([
          { key: SA.ProjectId, value: input.projectId },
          { key: SA.EmailIds, value: input.emailIds },
        ]),
      });
    } catch (err) {
      if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    }
    return workflowId;
  }

  async close(): Promise<void> {
    await this.connection.close();
  }
}
