// Application code written for AWS (SQS + EventBridge Scheduler), run against tidings.
// Only the clients' endpoint and credentials differ from what runs on AWS: both come from
// the environment (ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION).
// Exits 0 once the sent message and the scheduled reminder have both arrived.
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import {
  ConflictException,
  CreateScheduleCommand,
  DeleteScheduleCommand,
  GetScheduleCommand,
  ResourceNotFoundException,
  SchedulerClient,
} from '@aws-sdk/client-scheduler';

const endpoint = process.env.ENDPOINT;
if (!endpoint) {
  console.error('ENDPOINT is not set');
  process.exit(2);
}
const sqs = new SQSClient({ endpoint });
const scheduler = new SchedulerClient({ endpoint });

function fail(message) {
  console.error(`FAIL: ${message}`);
  process.exit(1);
}

// -- setup: the queue the application uses ------------------------------------------------
const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: 'jobs' }));
const { Attributes } = await sqs.send(
  new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['QueueArn'] }));
const jobsQueueArn = Attributes.QueueArn;
const invokeRole = 'arn:aws:iam::000000000000:role/scheduler-invoke';
console.log(`queue ${QueueUrl} (${jobsQueueArn})`);

// -- the application code, unchanged -------------------------------------------------------
const id = `inv-${Date.now()}`;
await sqs.send(new SendMessageCommand({
  QueueUrl,
  MessageBody: JSON.stringify({ type: 'invoice.generate', id }),
}));

const appointmentId = `appt-${Date.now()}`;
const remindAt = new Date(Date.now() + 3000).toISOString().slice(0, 19);
const payload = JSON.stringify({
  type: 'appointment.reminder',
  appointmentId,
  scheduledFor: '<aws.scheduler.scheduled-time>',
});
const created = await scheduler.send(new CreateScheduleCommand({
  Name: `reminder-${appointmentId}`,
  ScheduleExpression: `at(${remindAt})`,
  Target: { Arn: jobsQueueArn, RoleArn: invokeRole, Input: payload },
  FlexibleTimeWindow: { Mode: 'OFF' },
}));
console.log(`schedule ${created.ScheduleArn} at ${remindAt}`);

// -- what the SDK sees back ----------------------------------------------------------------
const got = await scheduler.send(new GetScheduleCommand({ Name: `reminder-${appointmentId}` }));
if (got.Target.Arn !== jobsQueueArn || got.Target.Input !== payload
    || got.Target.RoleArn !== invokeRole || !(got.CreationDate instanceof Date)) {
  fail(`GetSchedule returned ${JSON.stringify(got)}`);
}
try {
  await scheduler.send(new CreateScheduleCommand({
    Name: `reminder-${appointmentId}`,
    ScheduleExpression: `at(${remindAt})`,
    Target: { Arn: jobsQueueArn, RoleArn: invokeRole, Input: payload },
    FlexibleTimeWindow: { Mode: 'OFF' },
  }));
  fail('a duplicate schedule name was accepted');
} catch (err) {
  if (!(err instanceof ConflictException)) throw err;
  console.log(`duplicate name: ${err.name} (${err.$metadata.httpStatusCode}): ${err.message}`);
}
try {
  await scheduler.send(new GetScheduleCommand({ Name: 'no-such-schedule' }));
  fail('a missing schedule was found');
} catch (err) {
  if (!(err instanceof ResourceNotFoundException)) throw err;
  console.log(`missing schedule: ${err.name} (${err.$metadata.httpStatusCode}): ${err.message}`);
}

// -- receive until both the sent message and the reminder have arrived ---------------------
const seen = {};
const deadline = Date.now() + 30000;
while (!(seen['invoice.generate'] && seen['appointment.reminder']) && Date.now() < deadline) {
  const { Messages = [] } = await sqs.send(new ReceiveMessageCommand({
    QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 2,
  }));
  for (const m of Messages) {
    const body = JSON.parse(m.Body);
    console.log(`received ${m.Body} at ${new Date().toISOString()}`);
    seen[body.type] = body;
    await sqs.send(new DeleteMessageCommand({ QueueUrl, ReceiptHandle: m.ReceiptHandle }));
  }
}
const invoice = seen['invoice.generate'];
const reminder = seen['appointment.reminder'];
if (!invoice || invoice.id !== id) fail('the sent message did not arrive');
if (!reminder || reminder.appointmentId !== appointmentId) fail('the reminder did not arrive');
if (reminder.scheduledFor !== `${remindAt}Z`) {
  fail(`scheduledFor is ${reminder.scheduledFor}, expected ${remindAt}Z`);
}
if (Date.now() < Date.parse(`${remindAt}Z`)) fail('the reminder arrived before its time');

// A one-shot stays until deleted (ActionAfterCompletion NONE).
await scheduler.send(new DeleteScheduleCommand({ Name: `reminder-${appointmentId}` }));
console.log('OK');
