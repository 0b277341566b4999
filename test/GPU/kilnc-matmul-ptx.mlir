// Every kernel kilnc emits assembles with ptxas for both targets it claims, with no spills.
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t
// RUN: kilnc %s --target=sm_80 -o %t/sm80 | FileCheck %s --check-prefix=WROTE
// RUN: FileCheck %s --check-prefix=MANIFEST80 < %t/sm80/manifest.json
// RUN: FileCheck %s --check-prefix=PTX80 < %t/sm80/ffn_k0_matmul_module.ptx
// RUN: kilnc %s --target=sm_90a -o %t/sm90 | FileCheck %s --check-prefix=WROTE
// RUN: FileCheck %s --check-prefix=MANIFEST90 < %t/sm90/manifest.json
// RUN: FileCheck %s --check-prefix=PTX90 < %t/sm90/ffn_k0_matmul_module.ptx
// RUN: %ptxas -arch=sm_90a %t/sm90/ffn_k0_matmul_module.ptx -o %t/again.cubin
// RUN: kilnc %s --target=sm_90a --emit=ptx | FileCheck %s --check-prefix=PTX90

// WROTE: kilnc: wrote {{.*}}manifest.json and the kernels it lists

// sm_80 has no programmatic dependent launch: its kernels launch the ordinary way.
// MANIFEST80-NOT: dependent_launch
// MANIFEST80: "cubin": "ffn_k0_matmul_module.sm_80.cubin"
// MANIFEST80: "name": "ffn_k0_matmul"
// MANIFEST80: "op": "kiln.matmul"
// MANIFEST80: "registers": {{[0-9]+}}
// MANIFEST80: "spill_loads": 0,
// MANIFEST80-NEXT: "spill_stores": 0
// MANIFEST80: 0 bytes spill stores, 0 bytes spill loads
// MANIFEST80-NOT: [1-9][0-9]* bytes spill stores
// MANIFEST80: "target": "sm_80"

// On sm_90a the 77-row GEMM takes the wgmma kernel: two warpgroups, 128 x 64 x 64 tiles (128 x 128 would leave
// most of the H200 idle), four stages of 24 KB in 1024-byte aligned shared memory and their four mbarriers, the
// tiles copied by TMA through the two tensor maps the manifest describes: A as 77 rows of 256 (K), B as 256 rows
// of 512 (N) in 64 x 64 panels.
// MANIFEST90: "block": [
// MANIFEST90-NEXT: 256,
// MANIFEST90: "lowering": "wgmma",
// MANIFEST90: "tile": [
// MANIFEST90-NEXT: 128,
// MANIFEST90-NEXT: 64,
// MANIFEST90-NEXT: 64
// MANIFEST90: "cubin": "ffn_k0_matmul_module.sm_90a.cubin"
// The kernel waits for its predecessor itself (griddepcontrol.wait below), but as the first kernel of its plan it
// launches the ordinary way.
// MANIFEST90-NOT: dependent_launch
// MANIFEST90: "dynamic_shared_bytes": 98368
// MANIFEST90: "grid": [
// MANIFEST90-NEXT: 8,
// MANIFEST90-NEXT: 1,
// MANIFEST90-NEXT: 1
// MANIFEST90: "dtype": "bf16"
// MANIFEST90: "role": "output"
// MANIFEST90: "tensor_maps": [
// MANIFEST90-NEXT: {
// MANIFEST90-NEXT: "box": [
// MANIFEST90-NEXT: 64,
// MANIFEST90-NEXT: 128,
// MANIFEST90-NEXT: 1
// MANIFEST90-NEXT: ],
// MANIFEST90-NEXT: "buffer": 0,
// MANIFEST90-NEXT: "dims": [
// MANIFEST90-NEXT: 256,
// MANIFEST90-NEXT: 77,
// MANIFEST90-NEXT: 1
// MANIFEST90: "buffer": 1,
// MANIFEST90-NEXT: "dims": [
// MANIFEST90-NEXT: 512,
// MANIFEST90-NEXT: 256,
// MANIFEST90-NEXT: 1
// MANIFEST90: "swizzle": 128
// MANIFEST90: 0 bytes spill stores, 0 bytes spill loads
// MANIFEST90: "target": "sm_90a"

// PTX80: .target sm_80
// PTX80: cp.async.cg.shared.global
// PTX80: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX80: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// PTX80: mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32

// PTX90: .target sm_90a
// PTX90: .extern .shared .align 1024 .b8 ffn_k0_matmul_smem[]
// PTX90: .param .align 64 .b8 ffn_k0_matmul_param_{{[0-9]+}}[128]
// PTX90: cvta.param.u64
// PTX90: griddepcontrol.wait;
// PTX90-NEXT: griddepcontrol.launch_dependents;
// PTX90: mbarrier.init.shared.b64
// PTX90: fence.mbarrier_init.release.cluster;
// PTX90: mbarrier.arrive.expect_tx.shared.b64
// PTX90: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX90: bar.sync 0;
// The k loop, as LLVM lays it out: its first iteration peeled (the MMAs, then the copies of the tile stages - 1
// ahead into the slot no tile has used, with no block-wide barrier), the other iterations after the loop's exit:
// the slot's release on its "empty" mbarrier, the copying thread's wait on it, the copies.
// PTX90: mbarrier.try_wait.parity.shared.b64
// PTX90: wgmma.fence.sync.aligned;
// PTX90-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16
// PTX90: wgmma.commit_group.sync.aligned;
// PTX90: wgmma.wait_group.sync.aligned 1;
// PTX90-NOT: bar.sync
// PTX90: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// PTX90: wgmma.wait_group.sync.aligned 0;
// PTX90: wgmma.wait_group.sync.aligned 1;
// PTX90-NOT: bar.sync
// PTX90: mbarrier.arrive.shared.b64
// PTX90-NOT: bar.sync
// PTX90: mbarrier.try_wait.parity.shared.b64
// PTX90-NOT: bar.sync
// PTX90: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
func.func @ffn(%x: tensor<77x256xbf16>, %w: tensor<256x512xbf16>, %b: tensor<512xbf16>) -> tensor<77x512xbf16> {
  %y = kiln.matmul %x, %w : tensor<77x256xbf16>, tensor<256x512xbf16> -> tensor<77x512xbf16>
  %z = kiln.add %y, %b : tensor<77x512xbf16>, tensor<512xbf16> -> tensor<77x512xbf16>
  %g = kiln.gelu %z approximate(tanh) : tensor<77x512xbf16>
  return %g : tensor<77x512xbf16>
}
