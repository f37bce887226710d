#!/usr/bin/env node
// check_onnx.mjs -- run an ONNX model with ONNX Runtime (CPU, onnxruntime-node)
// and compare its outputs against reference vectors.
//
// Usage:
//   node tests/onnx/check_onnx.mjs MODEL.onnx VECTORS.json
//        [--rtol R] [--atol A] [--floor-rel F]
//
// VECTORS.json:
//   {"inputs":  {"NAME": {"shape": [..], "data": [floats...]}, ...},
//    "outputs": {"NAME": {"shape": [..], "data": [floats...]}, ...}}
// "data" is the tensor flattened in row-major (C) order. Every input is fed as
// a float32 tensor with the given shape. Every output listed is checked; model
// outputs that are not listed are ignored.
//
// Tolerance. For an output with reference values want[i], let
//     floor = F * max_i |want[i]|          (F = --floor-rel, default 1e-3)
//     scale[i] = max(|want[i]|, floor)
// and element i passes when
//     |got[i] - want[i]| <= rtol * scale[i] + atol     (rtol 1e-4, atol 0 by default)
// So it is a relative test, except that cells whose magnitude is below 1/1000
// of the output's largest value are compared on that output's scale instead of
// their own (an exact-zero reference cell would otherwise demand bit equality).
// The reported max relative error is max_i |got[i] - want[i]| / scale[i].
// NaN in the output, or a different shape, fails the check.
//
// Exit status: 0 all outputs pass; 1 some check failed (the failing outputs are
// named in the last line); 2 usage error, unreadable/invalid MODEL or VECTORS
// file, or the model could not be run with the given inputs.

import fs from 'node:fs';
import path from 'node:path';
import process from 'node:process';

const USAGE =
  'usage: node check_onnx.mjs MODEL.onnx VECTORS.json [--rtol R] [--atol A] [--floor-rel F]\n' +
  '  defaults: --rtol 1e-4 --atol 0 --floor-rel 1e-3';

function die(msg) {
  console.error(`check_onnx: error: ${msg}`);
  process.exit(2);
}

function usage(msg) {
  if (msg) console.error(`check_onnx: ${msg}`);
  console.error(USAGE);
  process.exit(2);
}

// ---- arguments --------------------------------------------------------------
const opts = { rtol: 1e-4, atol: 0, floorRel: 1e-3 };
const positional = [];
{
  const argv = process.argv.slice(2);
  const numOpt = { '--rtol': 'rtol', '--atol': 'atol', '--floor-rel': 'floorRel' };
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i];
    if (a === '-h' || a === '--help') usage();
    let value;
    const eq = a.indexOf('=');
    if (a.startsWith('--') && eq > 0) {
      value = a.slice(eq + 1);
      a = a.slice(0, eq);
    }
    if (a in numOpt) {
      if (value === undefined) {
        if (i + 1 >= argv.length) usage(`option ${a} needs a value`);
        value = argv[++i];
      }
      const v = Number(value);
      if (value.trim() === '' || !Number.isFinite(v) || v < 0) {
        usage(`option ${a}: expected a non-negative number, got '${value}'`);
      }
      opts[numOpt[a]] = v;
    } else if (a.startsWith('--')) {
      usage(`unknown option ${a}`);
    } else {
      positional.push(argv[i]);
    }
  }
  if (positional.length !== 2) usage('expected exactly two arguments: MODEL.onnx VECTORS.json');
}
const [modelPath, vectorsPath] = positional.map((p) => path.resolve(p));

// ---- vectors file -----------------------------------------------------------
function product(shape) {
  return shape.reduce((a, b) => a * b, 1);
}

function readVectors(file) {
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    die(`cannot read vectors file ${file}: ${e.message}`);
  }
  let doc;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    die(`vectors file ${file} is not valid JSON: ${e.message}`);
  }
  const isObj = (x) => x !== null && typeof x === 'object' && !Array.isArray(x);
  if (!isObj(doc)) die(`vectors file ${file}: top level must be an object`);
  for (const section of ['inputs', 'outputs']) {
    if (!isObj(doc[section])) die(`vectors file ${file}: missing or invalid "${section}" object`);
    for (const [name, t] of Object.entries(doc[section])) {
      const where = `vectors file ${file}: ${section}.${name}`;
      if (!isObj(t)) die(`${where}: expected {"shape": [...], "data": [...]}`);
      if (!Array.isArray(t.shape) || !t.shape.every((d) => Number.isInteger(d) && d >= 0)) {
        die(`${where}: "shape" must be an array of non-negative integers`);
      }
      if (!Array.isArray(t.data)) die(`${where}: "data" must be an array of numbers`);
      const bad = t.data.findIndex((v) => typeof v !== 'number');
      if (bad >= 0) die(`${where}: data[${bad}] is not a number (${JSON.stringify(t.data[bad])})`);
      if (t.data.length !== product(t.shape)) {
        die(`${where}: shape [${t.shape}] has ${product(t.shape)} elements but data has ${t.data.length}`);
      }
    }
  }
  if (Object.keys(doc.outputs).length === 0) die(`vectors file ${file}: "outputs" is empty, nothing to check`);
  return doc;
}

const vectors = readVectors(vectorsPath);

// ---- session ----------------------------------------------------------------
let ort;
try {
  ort = await import('onnxruntime-node');
} catch (e) {
  die(`cannot load onnxruntime-node (run tests/onnx/setup.sh first): ${e.message}`);
}

if (!fs.existsSync(modelPath)) die(`model file ${modelPath} does not exist`);
let session;
try {
  session = await ort.InferenceSession.create(modelPath, {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    intraOpNumThreads: 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  });
} catch (e) {
  die(`cannot load model file ${modelPath}: ${e.message}`);
}

const fmtShape = (s) => `[${s.join(',')}]`;
function describe(names, metadata) {
  return names.map((n, i) => {
    const m = Array.isArray(metadata) ? metadata.find((x) => x.name === n) ?? metadata[i] : undefined;
    if (m && m.isTensor) return `${n} ${m.type}${fmtShape(m.shape)}`;
    if (m) return `${n} (non-tensor)`;
    return n;
  });
}
console.log(`model: ${modelPath}  (onnxruntime-node ${ort.env?.versions?.node ?? '?'})`);
console.log(`model inputs:  ${describe(session.inputNames, session.inputMetadata).join('  ')}`);
console.log(`model outputs: ${describe(session.outputNames, session.outputMetadata).join('  ')}`);
console.log(`tolerance: rtol=${opts.rtol} atol=${opts.atol} floor=${opts.floorRel}*max|want|`);

// ---- feeds ------------------------------------------------------------------
for (const name of Object.keys(vectors.inputs)) {
  if (!session.inputNames.includes(name)) {
    die(`vectors file ${vectorsPath}: input '${name}' is not an input of the model (model inputs: ${session.inputNames.join(', ')})`);
  }
}
const missingInputs = session.inputNames.filter((n) => !(n in vectors.inputs));
if (missingInputs.length) {
  die(`vectors file ${vectorsPath} lacks model input(s): ${missingInputs.join(', ')}`);
}
const feeds = {};
for (const [name, t] of Object.entries(vectors.inputs)) {
  feeds[name] = new ort.Tensor('float32', Float32Array.from(t.data), t.shape);
}

const wanted = Object.keys(vectors.outputs);
const fetchNames = wanted.filter((n) => session.outputNames.includes(n));
let results = {};
if (fetchNames.length) {
  try {
    results = await session.run(feeds, fetchNames);
  } catch (e) {
    die(`running model ${modelPath} with inputs from ${vectorsPath} failed: ${e.message}`);
  }
}

// ---- compare ----------------------------------------------------------------
function unravel(flat, shape) {
  const idx = new Array(shape.length).fill(0);
  for (let d = shape.length - 1; d >= 0; d--) {
    idx[d] = flat % shape[d];
    flat = Math.floor(flat / shape[d]);
  }
  return idx;
}
const g = (x) => (typeof x === 'number' ? x.toPrecision(7) : String(x));

const failed = [];
for (const name of wanted) {
  const want = vectors.outputs[name];
  if (!fetchNames.includes(name)) {
    console.log(`output ${name}: FAIL not an output of the model (model outputs: ${session.outputNames.join(', ')})`);
    failed.push(name);
    continue;
  }
  const t = results[name];
  const gotShape = Array.from(t.dims ?? [], Number);
  const n = want.data.length;
  if (fmtShape(gotShape) !== fmtShape(want.shape)) {
    console.log(`output ${name}: FAIL shape ${fmtShape(gotShape)} != expected ${fmtShape(want.shape)}`);
    failed.push(name);
    continue;
  }
  if (t.type === 'string' || t.data == null || typeof t.data[Symbol.iterator] !== 'function') {
    console.log(`output ${name}: FAIL unsupported tensor type ${t.type}`);
    failed.push(name);
    continue;
  }
  const got = Array.from(t.data, Number); // float32/float64/int*/bigint -> number

  let maxAbsWant = 0;
  for (const w of want.data) maxAbsWant = Math.max(maxAbsWant, Math.abs(w));
  const floor = opts.floorRel * maxAbsWant;

  let maxAbs = 0;
  let maxRel = 0;
  let worst = -1;
  let worstRatio = -1; // error / allowed error; > 1 means the element fails
  let nFail = 0;
  for (let i = 0; i < n; i++) {
    const err = Math.abs(got[i] - want.data[i]);
    const scale = Math.max(Math.abs(want.data[i]), floor);
    const allowed = opts.rtol * scale + opts.atol;
    // NaN error (NaN output) counts as infinitely wrong.
    const e = Number.isNaN(err) ? Infinity : err;
    const rel = e === 0 ? 0 : scale > 0 ? e / scale : Infinity;
    const ratio = e === 0 ? 0 : allowed > 0 ? e / allowed : Infinity;
    if (!(e <= allowed)) nFail++;
    maxAbs = Math.max(maxAbs, e);
    maxRel = Math.max(maxRel, rel);
    if (ratio > worstRatio) {
      worstRatio = ratio;
      worst = i;
    }
  }
  const ok = nFail === 0;
  let line =
    `output ${name}: ${ok ? 'PASS' : 'FAIL'} shape ${fmtShape(gotShape)} n=${n}` +
    ` max_abs_err=${g(maxAbs)} max_rel_err=${g(maxRel)}`;
  if (worst >= 0) {
    line +=
      ` worst=${fmtShape(unravel(worst, want.shape))} (flat ${worst})` +
      ` got=${g(got[worst])} want=${g(want.data[worst])} err/allowed=${g(worstRatio)}`;
  }
  if (!ok) line += ` failing_elements=${nFail}/${n}`;
  console.log(line);
  if (!ok) failed.push(name);
}

if (failed.length) {
  console.log(`FAIL: ${failed.length}/${wanted.length} output(s) failed: ${failed.join(', ')}`);
  process.exit(1);
}
console.log(`PASS: all ${wanted.length} output(s) within tolerance`);
process.exit(0);
