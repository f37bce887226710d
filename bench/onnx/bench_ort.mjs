#!/usr/bin/env node
// bench_ort.mjs -- showers/s of an exported generator (`mpigan export ... --onnx G.onnx`) in ONNX
// Runtime's CPU execution provider (npm's onnxruntime-node, installed by tests/onnx/setup.sh):
// the whole graph per batch (the latent's conditioning, the generator, the inverse preprocessing),
// fed fresh N(0, 1) latents and energies uniform in 10..500 GeV, as `mpigan generate` is.
//
// Usage: node bench/onnx/bench_ort.mjs G.onnx [--batch B] [--batches K] [--warmup W] [--threads T]
// Last line: showers_per_s=X (over the K timed batches).
import path from 'node:path';
import process from 'node:process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '..', '..', 'tests', 'onnx', 'package.json'));
let ort;
try {
  ort = require('onnxruntime-node');
} catch (e) {
  console.error('bench_ort: onnxruntime-node is not installed: run tests/onnx/setup.sh first');
  process.exit(2);
}

const opts = { batch: 128, batches: 4, warmup: 1, threads: 1 };
const argv = process.argv.slice(2);
let model = null;
for (let i = 0; i < argv.length; i++) {
  const k = argv[i].replace(/^--/, '');
  if (argv[i].startsWith('--')) {
    if (!(k in opts) || i + 1 >= argv.length) {
      console.error(`bench_ort: unknown option or missing value: ${argv[i]}`);
      process.exit(2);
    }
    const v = Number(argv[++i]);
    if (!Number.isInteger(v) || v < (k === 'warmup' ? 0 : 1)) {
      console.error(`bench_ort: --${k} expects a positive integer, got '${argv[i]}'`);
      process.exit(2);
    }
    opts[k] = v;
  } else {
    model = argv[i];
  }
}
if (!model) {
  console.error('usage: node bench/onnx/bench_ort.mjs G.onnx [--batch B] [--batches K] [--warmup W] [--threads T]');
  process.exit(2);
}

const session = await ort.InferenceSession.create(model, {
  intraOpNumThreads: opts.threads,
  interOpNumThreads: 1,
  graphOptimizationLevel: 'all',
});
function gaussian() {
  let u = 0;
  while (u === 0) u = Math.random();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * Math.random());
}

function feeds(n, width) {
  const f = {};
  const latent = new Float32Array(n * width);
  for (let i = 0; i < latent.length; i++) latent[i] = gaussian();
  f.latent = new ort.Tensor('float32', latent, [n, width]);
  const energy = new Float32Array(n);
  for (let i = 0; i < n; i++) energy[i] = 10 + 490 * Math.random();
  f.energy = new ort.Tensor('float32', energy, [n, 1]);
  if (session.inputNames.includes('theta')) {
    const theta = new Float32Array(n);
    for (let i = 0; i < n; i++) theta[i] = 1.07 + Math.random();
    f.theta = new ort.Tensor('float32', theta, [n, 1]);
  }
  return f;
}

// The latent's width as the graph declares it: (N, width).
const latentMeta = session.inputMetadata.find((m) => m.name === 'latent');
if (!latentMeta || latentMeta.shape.length !== 2 || !Number.isInteger(latentMeta.shape[1])) {
  console.error(`bench_ort: ${model} has no input 'latent' of shape (N, width): not an mpigan generator export`);
  process.exit(2);
}
const width = latentMeta.shape[1];
console.log(`model=${path.basename(model)} latent=${width} batch=${opts.batch} batches=${opts.batches} ` +
            `threads=${opts.threads} onnxruntime-node=${require('onnxruntime-node/package.json').version}`);
for (let w = 0; w < opts.warmup; w++) {
  const t0 = process.hrtime.bigint();
  await session.run(feeds(opts.batch, width));
  console.log(`warmup ${w}: ${(Number(process.hrtime.bigint() - t0) / 1e9).toFixed(3)} s`);
}
let total = 0;
for (let b = 0; b < opts.batches; b++) {
  const f = feeds(opts.batch, width);  // inputs made outside the timed span, as in mpigan's bench
  const t0 = process.hrtime.bigint();
  await session.run(f);
  const dt = Number(process.hrtime.bigint() - t0) / 1e9;
  total += dt;
  console.log(`batch ${b}: ${dt.toFixed(3)} s`);
}
console.log(`showers_per_s=${(opts.batch * opts.batches / total).toFixed(2)}`);
