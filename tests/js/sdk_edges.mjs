// Application code written for AWS, meeting tidings' edges through the AWS SDK for
// JavaScript v3: the long-poll cap (a throttling error the SDK retries by itself), SES v2
// operations tidings does not implement (a named error, not "UnknownError"), and email with
// and without a contact list. Run by tests/integration/test_aws_js.py against a node that
// lets one long poll wait at once (TIDINGS_MAX_LONG_POLLS=1) and sends through a relay the
// test reads. Prints one line per finding; exits 0 after "OK".
import {
  CreateQueueCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import {
  CreateConfigurationSetCommand,
  GetAccountCommand,
  GetEmailTemplateCommand,
  NotFoundException,
  SendEmailCommand,
  SESv2Client,
} from '@aws-sdk/client-sesv2';

const endpoint = process.env.ENDPOINT;
if (!endpoint) {
  console.error('ENDPOINT is not set');
  process.exit(2);
}

function fail(message) {
  console.error(`FAIL: ${message}`);
  process.exit(1);
}

// -- the long-poll cap --------------------------------------------------------------------
const sender = new SQSClient({ endpoint, maxAttempts: 1 });
const holder = new SQSClient({ endpoint, maxAttempts: 10 });
const probe = new SQSClient({ endpoint, maxAttempts: 1 });
const { QueueUrl: heldUrl } = await sender.send(new CreateQueueCommand({ QueueName: 'held' }));
const { QueueUrl: workUrl } = await sender.send(new CreateQueueCommand({ QueueName: 'work' }));

// Starts a long poll that holds the node's one slot; resolves once it does (a probe's long
// poll is refused), with a function that releases it (a message for it to return with).
async function hold() {
  const pending = holder.send(new ReceiveMessageCommand({ QueueUrl: heldUrl,
                                                          WaitTimeSeconds: 20 }));
  const deadline = Date.now() + 15000;
  for (;;) {
    try {
      await probe.send(new ReceiveMessageCommand({ QueueUrl: workUrl, WaitTimeSeconds: 1 }));
    } catch (err) {
      if (err.name !== 'RequestThrottled') throw err;
      break;
    }
    if (Date.now() > deadline) fail('the held long poll never took the slot');
  }
  let released = false;
  return async () => {
    if (released) return;
    released = true;
    await sender.send(new SendMessageCommand({ QueueUrl: heldUrl, MessageBody: 'release' }));
    const { Messages = [] } = await pending;
    if (Messages[0]?.Body !== 'release') fail('the held long poll did not get its message');
  };
}

// Every attempt the client makes (this step runs once per attempt, inside the SDK's retry
// loop), with what it was answered.
function countAttempts(client, onThrottled) {
  const answers = [];
  client.middlewareStack.add((next) => async (args) => {
    try {
      const out = await next(args);
      answers.push(String(out.response.statusCode));
      return out;
    } catch (err) {
      const retryAfter = err.$response?.headers?.['retry-after'];
      answers.push(`${err.$metadata?.httpStatusCode} ${err.name} retry-after=${retryAfter}`);
      if (err.name === 'RequestThrottled') await onThrottled();
      throw err;
    }
  }, { step: 'deserialize', priority: 'high', name: 'countAttempts' });
  return answers;
}

{
  const release = await hold();
  await sender.send(new SendMessageCommand({ QueueUrl: workUrl, MessageBody: 'job' }));
  const consumer = new SQSClient({ endpoint, maxAttempts: 4 });
  const answers = countAttempts(consumer, release);  // the retry finds the slot free
  const got = await consumer.send(new ReceiveMessageCommand({ QueueUrl: workUrl,
                                                              WaitTimeSeconds: 5 }));
  await release();
  console.log(`cap retried: attempts=${got.$metadata.attempts} `
              + `answers=${answers.join(',')} body=${got.Messages?.[0]?.Body}`);
  if (got.Messages?.[0]?.Body !== 'job') fail('the retried receive did not get the job');
  if (got.$metadata.attempts < 2) fail('the throttled receive was not retried by the SDK');
}
{
  const release = await hold();
  const consumer = new SQSClient({ endpoint, maxAttempts: 2 });
  const answers = countAttempts(consumer, async () => {});
  try {
    await consumer.send(new ReceiveMessageCommand({ QueueUrl: workUrl, WaitTimeSeconds: 5 }));
    fail('a receive over the cap succeeded');
  } catch (err) {
    if (err.name !== 'RequestThrottled') throw err;
    console.log(`cap exhausted: ${err.name} (${err.$metadata.httpStatusCode}) `
                + `attempts=${err.$metadata.attempts} answers=${answers.join(',')}: `
                + `${err.message}`);
  } finally {
    await release();
  }
}

// -- SES v2: operations tidings does not implement ----------------------------------------
const ses = new SESv2Client({ endpoint, maxAttempts: 1 });
for (const [name, command] of [
  ['GetAccount', new GetAccountCommand({})],
  ['CreateConfigurationSet', new CreateConfigurationSetCommand({
    ConfigurationSetName: 'marketing' })],
]) {
  try {
    await ses.send(command);
    fail(`${name} succeeded`);
  } catch (err) {
    console.log(`${name}: ${err.name} (${err.$metadata?.httpStatusCode}): ${err.message}`);
  }
}
try {
  await ses.send(new GetEmailTemplateCommand({ TemplateName: 'absent' }));
  fail('a missing template was found');
} catch (err) {
  if (!(err instanceof NotFoundException)) throw err;
  console.log(`missing template: ${err.name} (${err.$metadata.httpStatusCode})`);
}

// -- SES v2: a transactional send, and one that names a contact list ----------------------
const simple = { Simple: { Subject: { Data: 'Your receipt' },
                           Body: { Text: { Data: 'Thank you.' } } } };
const receipt = await ses.send(new SendEmailCommand({
  FromEmailAddress: 'shop@example.com',
  Destination: { ToAddresses: ['receipt@example.org'] },
  Content: simple,
}));
const news = await ses.send(new SendEmailCommand({
  FromEmailAddress: 'shop@example.com',
  Destination: { ToAddresses: ['member@example.org'] },
  Content: simple,
  ListManagementOptions: { ContactListName: 'news' },
}));
console.log(`sent ${receipt.MessageId} ${news.MessageId}`);
console.log('OK');
