#!/usr/bin/env node
// ort-run.mjs - run an ONNX model with ONNX Runtime's CPU execution provider
// (onnxruntime-node, installed by scripts/setup.sh) as a numerical oracle for
// h20. Inputs and outputs are .npy files.
//
//   node ort-run.mjs MODEL.onnx --input NAME=FILE.npy ... --output-dir DIR
//                    [--outputs NAME,NAME...] [--no-opt] [--threads N]
//   node ort-run.mjs --version        # prints the ONNX Runtime version
//
// Every graph input must be given once. Inputs are checked against the model
// before anything runs: dtype, rank, static dims, and dims that share a
// dim_param must agree across inputs. The .npy files must be little-endian
// and C order, of dtype float32, float16, float64, int64, int32, int16, int8,
// uint8, uint16, uint32, uint64 or bool.
//
// Each requested output (default: every graph output) is written as
// DIR/NAME.npy (DIR is created if missing; characters of NAME outside
// [A-Za-z0-9._-] become '_'), atomically: a temporary file in DIR, then
// rename. The model is loaded from its path, so external data (a .data file
// beside the .onnx, named in the model) is found relative to the model.
// --no-opt disables ONNX Runtime's graph optimizations (default: all);
// --threads sets the intra-op thread count (default: ONNX Runtime's).
//
// Exit codes: 0 success, 2 bad input (usage, unreadable or invalid .npy,
// unknown/missing/mismatched input, model that does not load, unknown output
// name), 1 ONNX Runtime failed while running or an output could not be
// written. Every error names the file, input or output at fault.
//
// The package is found in $H20_ORT_NODE_MODULES, else in
// third_party/ort/node_modules of this repository (scripts/setup.sh puts it
// there), else through Node's own module resolution.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const PROG = 'ort-run';

class UserError extends Error {
  constructor(message, code = 2) {
    super(message);
    this.code = code;
  }
}
const fail = (message, code = 2) => { throw new UserError(message, code); };

const USAGE = `usage: ort-run MODEL.onnx --input NAME=FILE.npy ... --output-dir DIR
               [--outputs NAME,NAME...] [--no-opt] [--threads N]
       ort-run --version`;

// ---------------------------------------------------------------- ORT ---

function loadOrt() {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const dirs = [];
  if (process.env.H20_ORT_NODE_MODULES) dirs.push(process.env.H20_ORT_NODE_MODULES);
  dirs.push(path.resolve(here, '..', '..', 'third_party', 'ort', 'node_modules'));
  for (const d of dirs) {
    const pkg = path.join(d, 'onnxruntime-node');
    if (fs.existsSync(path.join(pkg, 'package.json'))) {
      try {
        return createRequire(import.meta.url)(pkg);
      } catch (e) {
        fail(`cannot load onnxruntime-node from '${pkg}': ${e.message}`, 1);
      }
    }
  }
  try {
    return createRequire(import.meta.url)('onnxruntime-node');
  } catch (e) {
    fail(`onnxruntime-node is not installed (looked in ${dirs.map((d) => `'${d}'`).join(', ')} ` +
         `and Node's module path); run scripts/setup.sh`, 1);
  }
}

// ---------------------------------------------------------------- npy ---

// npy descr (without byte order) -> ONNX Runtime tensor type, typed array.
const NPY_TYPES = {
  f4: ['float32', Float32Array], f8: ['float64', Float64Array], f2: ['float16', Uint16Array],
  i8: ['int64', BigInt64Array], i4: ['int32', Int32Array], i2: ['int16', Int16Array],
  i1: ['int8', Int8Array], u1: ['uint8', Uint8Array], u2: ['uint16', Uint16Array],
  u4: ['uint32', Uint32Array], u8: ['uint64', BigUint64Array], b1: ['bool', Uint8Array],
};
const ORT_TO_NPY = Object.fromEntries(Object.entries(NPY_TYPES).map(([k, [t]]) => [t, k]));
const SUPPORTED = Object.values(NPY_TYPES).map(([t]) => t).join(', ');

function headerField(h, key) {
  const m = h.match(new RegExp(`['"]${key}['"]\\s*:\\s*`));
  if (!m) return undefined;
  let rest = h.slice(m.index + m[0].length);
  if (rest[0] === '(') return rest.slice(0, rest.indexOf(')') + 1);
  if (rest[0] === "'" || rest[0] === '"') return rest.slice(1, rest.indexOf(rest[0], 1));
  return rest.match(/^[A-Za-z]+/)?.[0];
}

function readNpy(file, what) {
  let buf;
  try {
    buf = fs.readFileSync(file);
  } catch (e) {
    fail(`${what}: cannot read '${file}': ${e.code === 'ENOENT' ? 'no such file' : e.message}`);
  }
  const bad = (msg) => fail(`${what}: '${file}': ${msg}`);
  if (buf.length < 10 || buf.subarray(0, 6).toString('latin1') !== '\x93NUMPY')
    bad('not a .npy file (bad magic)');
  const major = buf[6];
  let len, start;
  if (major === 1) { len = buf.readUInt16LE(8); start = 10; }
  else if ((major === 2 || major === 3) && buf.length >= 12) { len = buf.readUInt32LE(8); start = 12; }
  else bad(`unsupported .npy version ${major}`);
  if (start + len > buf.length) bad('.npy header is truncated');
  const h = buf.subarray(start, start + len).toString(major === 3 ? 'utf8' : 'latin1');
  const descr = headerField(h, 'descr'), fortran = headerField(h, 'fortran_order'),
        shapeText = headerField(h, 'shape');
  if (descr === undefined || fortran === undefined || shapeText === undefined)
    bad('.npy header lacks descr/fortran_order/shape');
  if (fortran !== 'False') bad('.npy data is in Fortran order; only C order is read');
  const order = descr[0], code = descr.slice(1);
  const entry = NPY_TYPES[code];
  if (!entry || !'<>|='.includes(order))
    bad(`.npy dtype '${descr}' is not supported (supported: ${SUPPORTED})`);
  const [type, Typed] = entry;
  const little = order === '<' || order === '|' || (order === '=' && os.endianness() === 'LE');
  if (!little && Typed.BYTES_PER_ELEMENT > 1)
    bad(`.npy data is big-endian ('${descr}'); only little-endian is read`);
  if (!/^\(\s*(\d+\s*,\s*)*(\d+\s*,?\s*)?\)$/.test(shapeText)) bad(`.npy shape ${shapeText} is malformed`);
  const dims = (shapeText.match(/\d+/g) || []).map(Number);
  const count = dims.reduce((a, b) => a * b, 1);
  const bytes = count * Typed.BYTES_PER_ELEMENT, dataStart = start + len;
  if (buf.length - dataStart !== bytes)
    bad(`.npy data holds ${buf.length - dataStart} bytes but shape ${shapeText} of ${type} needs ${bytes}`);
  // Copy into a fresh, aligned buffer (the file's data may start anywhere).
  const data = new Typed(buf.buffer.slice(buf.byteOffset + dataStart, buf.byteOffset + dataStart + bytes));
  if (type === 'bool') for (let i = 0; i < data.length; ++i) data[i] = data[i] ? 1 : 0;
  return { type, dims, data };
}

function encodeNpy(type, dims, bytes) {
  const code = ORT_TO_NPY[type];
  const order = code === 'b1' || code === 'i1' || code === 'u1' ? '|' : '<';
  const shape = `(${dims.join(', ')}${dims.length === 1 ? ',' : ''})`;
  let header = `{'descr': '${order}${code}', 'fortran_order': False, 'shape': ${shape}, }`;
  header += ' '.repeat((64 - ((10 + header.length + 1) % 64)) % 64) + '\n';
  const pre = Buffer.alloc(10);
  pre.write('\x93NUMPY', 0, 'latin1');
  pre[6] = 1; pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  return [pre, Buffer.from(header, 'latin1'), bytes];
}

// mkdir -p. Not fs.mkdirSync's {recursive: true}: under /proc it spins forever
// (Node 20) where mkdir fails with ENOENT however often it is retried.
function mkdirs(dir) {
  try {
    fs.mkdirSync(dir);
  } catch (e) {
    if (e.code === 'EEXIST' && fs.statSync(dir).isDirectory()) return;
    if (e.code !== 'ENOENT' || path.dirname(dir) === dir) throw e;
    mkdirs(path.dirname(dir));
    fs.mkdirSync(dir);
  }
}

function writeAtomically(file, parts) {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.tmp-${process.pid}`);
  let fd;
  try {
    fd = fs.openSync(tmp, 'w');
    for (const p of parts) fs.writeSync(fd, p);
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    fd = undefined;
    fs.renameSync(tmp, file);
  } catch (e) {
    if (fd !== undefined) try { fs.closeSync(fd); } catch {}
    try { fs.unlinkSync(tmp); } catch {}
    fail(`cannot write '${file}': ${e.message}`, 1);
  }
}

// --------------------------------------------------------------- args ---

function parseArgs(argv) {
  const a = { model: undefined, inputs: [], outputDir: undefined, outputs: undefined, opt: true,
              threads: undefined, version: false };
  for (let i = 0; i < argv.length; ++i) {
    const arg = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) fail(`${arg} needs a value\n${USAGE}`);
      return argv[++i];
    };
    if (arg === '--input') {
      const v = value(), eq = v.indexOf('=');
      if (eq <= 0 || eq === v.length - 1) fail(`--input '${v}' is not NAME=FILE.npy`);
      a.inputs.push([v.slice(0, eq), v.slice(eq + 1)]);
    } else if (arg === '--output-dir') a.outputDir = value();
    else if (arg === '--outputs') {
      a.outputs = value().split(',').filter((s) => s.length);
      if (!a.outputs.length) fail('--outputs names no output');
    }
    else if (arg === '--no-opt') a.opt = false;
    else if (arg === '--threads') {
      const v = value();
      if (!/^[1-9]\d*$/.test(v)) fail(`--threads '${v}' is not a positive integer`);
      a.threads = Number(v);
    } else if (arg === '--version') a.version = true;
    else if (arg === '-h' || arg === '--help') { console.log(USAGE); process.exit(0); }
    else if (arg.startsWith('-')) fail(`unknown option '${arg}'\n${USAGE}`);
    else if (a.model === undefined) a.model = arg;
    else fail(`unexpected argument '${arg}' (one model only)\n${USAGE}`);
  }
  if (a.version) return a;
  if (a.model === undefined) fail(`no model given\n${USAGE}`);
  if (a.outputDir === undefined) fail(`no --output-dir given\n${USAGE}`);
  return a;
}

// --------------------------------------------------------------- main ---

const fmtShape = (dims) => `[${dims.join(',')}]`;

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ort = loadOrt();
  if (args.version) {
    console.log(`onnxruntime-node ${ort.env.versions?.node ?? 'unknown'}`);
    return;
  }
  ort.env.logLevel = 'error';

  if (!fs.existsSync(args.model)) fail(`model '${args.model}': no such file`);
  const options = { executionProviders: ['cpu'], graphOptimizationLevel: args.opt ? 'all' : 'disabled' };
  if (args.threads) options.intraOpNumThreads = args.threads;
  let session;
  try {
    // By path, not buffer: ONNX Runtime then resolves external data files
    // relative to the model's directory.
    session = await ort.InferenceSession.create(path.resolve(args.model), options);
  } catch (e) {
    fail(`model '${args.model}' does not load in ONNX Runtime: ${e.message}`);
  }

  // Inputs: every graph input exactly once, dtype/rank/dims as the model says.
  const meta = new Map((session.inputMetadata ?? []).map((m) => [m.name, m]));
  const given = new Map();
  for (const [name, file] of args.inputs) {
    if (!session.inputNames.includes(name))
      fail(`input '${name}' (from '${file}') is not an input of '${args.model}'; ` +
           `its inputs are: ${session.inputNames.join(', ')}`);
    if (given.has(name)) fail(`input '${name}' is given twice`);
    given.set(name, file);
  }
  const missing = session.inputNames.filter((n) => !given.has(n));
  if (missing.length)
    fail(`missing input${missing.length > 1 ? 's' : ''} ${missing.map((n) => `'${n}'`).join(', ')} ` +
         `of '${args.model}' (give --input NAME=FILE.npy)`);
  const feeds = {}, symbols = new Map();
  for (const [name, file] of given) {
    const t = readNpy(file, `input '${name}'`);
    const m = meta.get(name);
    if (m && m.isTensor) {
      const where = `input '${name}' ('${file}')`;
      if (m.type !== t.type) fail(`${where} is ${t.type}; the model expects ${m.type}`);
      if (m.shape.length !== t.dims.length)
        fail(`${where} has shape ${fmtShape(t.dims)}; the model expects rank ${m.shape.length} ` +
             `[${m.shape.join(',')}]`);
      m.shape.forEach((d, i) => {
        if (typeof d === 'number' && d !== t.dims[i])
          fail(`${where} has dim ${i} = ${t.dims[i]}; the model expects ${d}`);
        if (typeof d === 'string' && d !== '') {
          const prev = symbols.get(d);
          if (prev && prev.value !== t.dims[i])
            fail(`${where} has dim ${i} ('${d}') = ${t.dims[i]} but input '${prev.input}' ` +
                 `has '${d}' = ${prev.value}`);
          symbols.set(d, { value: t.dims[i], input: name });
        }
      });
    }
    feeds[name] = new ort.Tensor(t.type, t.data, t.dims);
  }

  // Outputs: the requested ones (default all), each to its own file.
  const wanted = args.outputs ?? session.outputNames;
  const files = new Map();
  for (const name of wanted) {
    if (!session.outputNames.includes(name))
      fail(`output '${name}' is not an output of '${args.model}'; its outputs are: ` +
           session.outputNames.join(', '));
    const file = path.join(args.outputDir, name.replace(/[^A-Za-z0-9._-]/g, '_') + '.npy');
    for (const [other, f] of files)
      if (f === file) fail(`outputs '${other}' and '${name}' would both be written to '${file}'`);
    files.set(name, file);
  }
  try {
    mkdirs(path.resolve(args.outputDir));
  } catch (e) {
    fail(`cannot create output directory '${args.outputDir}': ${e.message}`);
  }

  let results;
  try {
    results = await session.run(feeds, [...files.keys()]);
  } catch (e) {
    fail(`ONNX Runtime failed to run '${args.model}': ${e.message}`, 1);
  }
  for (const [name, file] of files) {
    const t = results[name];
    if (!t || !ORT_TO_NPY[t.type])
      fail(`output '${name}' has type ${t ? t.type : 'none'}, which .npy output does not support ` +
           `(supported: ${SUPPORTED})`, 1);
    const d = t.data;
    writeAtomically(file, encodeNpy(t.type, t.dims, Buffer.from(d.buffer, d.byteOffset, d.byteLength)));
    console.log(`${name}: ${t.type} ${fmtShape(t.dims)} -> ${file}`);
  }
}

try {
  await main();
} catch (e) {
  if (e instanceof UserError) {
    console.error(`${PROG}: error: ${e.message}`);
    process.exit(e.code);
  }
  console.error(`${PROG}: internal error: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
}
