// A push subscription's endpoint written as a Node.js API would write it: every request
// verified with the Standard Webhooks JavaScript library. Prints one JSON line per
// request ({id, ok, body}) and, first, the port it listens on (run by
// tests/integration/test_push_js.py).
import http from 'node:http';
import { Webhook } from 'standardwebhooks';

const wh = new Webhook(process.env.PUSH_SECRET);

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    let job = null;
    try {
      job = wh.verify(body, req.headers);
    } catch (err) {
      console.log(JSON.stringify({ id: req.headers['webhook-id'], ok: false, error: String(err) }));
      res.writeHead(401).end();
      return;
    }
    console.log(JSON.stringify({
      id: req.headers['webhook-id'],
      ok: true,
      body: job,
      receiveCount: req.headers['tidings-receive-count'],
      attributes: JSON.parse(req.headers['tidings-message-attributes'] || '{}'),
    }));
    res.writeHead(204).end();
  });
});

server.listen(0, '127.0.0.1', () => {
  console.log(JSON.stringify({ port: server.address().port }));
});
