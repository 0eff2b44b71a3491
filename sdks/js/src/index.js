// eddy-guest: write eddy processors in JavaScript or TypeScript.
//
// Extend StatefulProcessor, declare typed state in init, and export it with
// `export const handler = exportProcessor(MyProcessor)`; build the component with
// `eddy-guest-build app.ts -o app.wasm`, and unit-test it with `eddy-guest/testing`.

export { CborError, decodeAny, encodeAny } from './cbor.js';
export { InitContext } from './context.js';
export { LEVELS, log, logger } from './log.js';
export { Output } from './output.js';
export { StatefulProcessor, errorMessage } from './processor.js';
export { Column, Key, Row, Rows } from './rows.js';
export { exportProcessor, installHost } from './runtime.js';
export { DataType, EddyError, Field, Schema } from './schema.js';
export { ListState, MapState, Timers, ValueState } from './state.js';
export { Codec, t } from './types.js';
