// A Node.js test suite's teardown against tidings: list every queue and delete it, then
// make sure tidings' own queues were neither listed nor touchable. ENDPOINT and the AWS_*
// credentials come from the environment, as in sdk_test.mjs.
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  ListQueuesCommand,
  PurgeQueueCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SetQueueAttributesCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';

const endpoint = process.env.ENDPOINT;
const account = '000000000000';
const sqs = new SQSClient({ endpoint, maxAttempts: 1 });

function fail(message) {
  console.error(`FAIL: ${message}`);
  process.exit(1);
}

const { QueueUrl: mine } = await sqs.send(new CreateQueueCommand({ QueueName: 'mine' }));
const listed = (await sqs.send(new ListQueuesCommand({}))).QueueUrls ?? [];
if (listed.length !== 1 || listed[0] !== mine) fail(`ListQueues: ${JSON.stringify(listed)}`);

for (const name of ['tidings-deliveries', 'tidings-email']) {
  const QueueUrl = `${endpoint}/${account}/${name}`;
  const attempts = {
    SendMessage: new SendMessageCommand({ QueueUrl, MessageBody: 'x' }),
    ReceiveMessage: new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 0 }),
    PurgeQueue: new PurgeQueueCommand({ QueueUrl }),
    SetQueueAttributes: new SetQueueAttributesCommand(
      { QueueUrl, Attributes: { VisibilityTimeout: '1' } }),
    DeleteQueue: new DeleteQueueCommand({ QueueUrl }),
  };
  for (const [action, command] of Object.entries(attempts)) {
    try {
      await sqs.send(command);
      fail(`${action} on ${name} succeeded`);
    } catch (err) {
      if (err.name !== 'AccessDenied' || err.$metadata?.httpStatusCode !== 403) {
        fail(`${action} on ${name}: ${err.name} ${err.$metadata?.httpStatusCode}`);
      }
    }
  }
}

// the teardown: delete every queue listed
for (const url of listed) await sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
console.log('internal queues: hidden and refused');
