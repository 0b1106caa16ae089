// The reference receiver of bench/webhook_ack.py --app probot: Probot (the Node.js GitHub App
// framework) doing the same work as llmgate's receiver: signature check (Probot's own), delivery
// dedupe and an arq-style enqueue in one Redis round trip, then 200. Run by the bench after
// `npm ci --prefix bench/probot`; reads PORT, REDIS_URL, GITHUB_WEBHOOK_SECRET, LOG_LEVEL.
import { createServer } from "node:http";
import { Probot, createNodeMiddleware } from "probot";
import { Redis } from "ioredis";
import { generateKeyPairSync } from "node:crypto";

const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048,
  privateKeyEncoding: { type: "pkcs8", format: "pem" }, publicKeyEncoding: { type: "spki", format: "pem" } });
const redis = new Redis(process.env.REDIS_URL);
// One round trip: dedupe the delivery, then store the job and queue it (as arq's enqueue does).
redis.defineCommand("enqueue", { numberOfKeys: 3, lua: `
if redis.call('SET', KEYS[1], '1', 'NX', 'EX', 86400) == false then return 0 end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'EX', 86400) == false then return 2 end
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[3])
return 1` });
const app = (probot) => {
  probot.on(["pull_request.opened", "pull_request.synchronize", "pull_request.reopened"], async (context) => {
    const pr = context.payload.pull_request;
    const repo = context.payload.repository.full_name;
    const jobId = `gate:${repo}#${pr.number}@${pr.head.sha}`;
    const job = JSON.stringify({ repo, number: pr.number, head: pr.head.sha, base: pr.base.sha,
      installation: context.payload.installation?.id, delivery: context.id });
    await redis.enqueue(`llmgate:delivery:${context.id}`, `arq:job:${jobId}`, "arq:queue",
      job, Date.now(), jobId);
  });
};
const probot = new Probot({ appId: 1, privateKey, secret: process.env.GITHUB_WEBHOOK_SECRET,
  logLevel: process.env.LOG_LEVEL || "warn" });
const middleware = await createNodeMiddleware(app, { probot, webhooksPath: "/webhook" });
createServer((req, res) => {
  if (req.url === "/healthz") { res.writeHead(200).end("ok"); return; }
  middleware(req, res, () => res.writeHead(404).end());
}).listen(Number(process.env.PORT), "127.0.0.1");
