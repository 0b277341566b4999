// RUN: kiln-opt %s -kiln-update-caches-in-place -split-input-file -verify-diagnostics | FileCheck %s

// kiln-update-caches-in-place gives the plan's call of each append kernel its caches as destinations (the new
// buffers go), and marks the kernel kiln.updates_in_place, when the old caches are dead after the call.

func.func private @step_k0_append_kv(%kc: tensor<8x16x2x64xbf16>, %vc: tensor<8x16x2x64xbf16>,
    %k: tensor<2x2x1x64xbf16>, %v: tensor<2x2x1x64xbf16>, %table: tensor<2x4xi32>, %pos: tensor<2xi32>,
    %kd: tensor<8x16x2x64xbf16>, %vd: tensor<8x16x2x64xbf16>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>)
    attributes {kiln.kernel} {
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %table, %pos : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>,
      tensor<2x2x1x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x4xi32>, tensor<2xi32>
      -> tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
  %1 = bufferization.materialize_in_destination %0#0 in %kd : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  %2 = bufferization.materialize_in_destination %0#1 in %vd : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  return %1, %2 : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
}
func.func private @step_k1_attention(%kc: tensor<8x16x2x64xbf16>, %out: tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
    attributes {kiln.kernel} {
  return %kc : tensor<8x16x2x64xbf16>
}
// CHECK-LABEL: func.func private @step_k0_append_kv
// CHECK-SAME: attributes {kiln.kernel, kiln.updates_in_place}
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[KC:[a-zA-Z0-9_]+]]: tensor<8x16x2x64xbf16>, %[[VC:[a-zA-Z0-9_]+]]: tensor<8x16x2x64xbf16>
// CHECK: %[[E:.+]] = tensor.empty() : tensor<8x16x2x64xbf16>
// CHECK-NEXT: call @step_k1_attention(%[[KC]], %[[E]])
// CHECK-NEXT: %[[NEW:.+]]:2 = call @step_k0_append_kv(%[[KC]], %[[VC]], %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[KC]], %[[VC]])
// A reader before the append is fine; the appended caches are read after it.
func.func @step(%kc: tensor<8x16x2x64xbf16>, %vc: tensor<8x16x2x64xbf16>, %k: tensor<2x2x1x64xbf16>,
    %v: tensor<2x2x1x64xbf16>, %table: tensor<2x4xi32>, %pos: tensor<2xi32>)
    -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) {
  %e = tensor.empty() : tensor<8x16x2x64xbf16>
  %before = call @step_k1_attention(%kc, %e) : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  %e0 = tensor.empty() : tensor<8x16x2x64xbf16>
  %e1 = tensor.empty() : tensor<8x16x2x64xbf16>
  %0:2 = call @step_k0_append_kv(%kc, %vc, %k, %v, %table, %pos, %e0, %e1) : (tensor<8x16x2x64xbf16>,
      tensor<8x16x2x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x4xi32>, tensor<2xi32>,
      tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>)
  return %before, %0#0, %0#1 : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
}

// -----

// The caches through views (the plan's reshapes share their bytes): a view read after the append is a read of
// the old cache.
func.func private @views_k0_append_kv(%kc: tensor<8x16x2x64xbf16>, %vc: tensor<8x16x2x64xbf16>,
    %k: tensor<2x2x1x64xbf16>, %v: tensor<2x2x1x64xbf16>, %table: tensor<2x4xi32>, %pos: tensor<2xi32>,
    %kd: tensor<8x16x2x64xbf16>, %vd: tensor<8x16x2x64xbf16>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>)
    attributes {kiln.kernel} {
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %table, %pos : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>,
      tensor<2x2x1x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x4xi32>, tensor<2xi32>
      -> tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
  %1 = bufferization.materialize_in_destination %0#0 in %kd : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  %2 = bufferization.materialize_in_destination %0#1 in %vd : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  return %1, %2 : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
}
func.func @views(%kflat: tensor<8x16x128xbf16>, %vc: tensor<8x16x2x64xbf16>, %k: tensor<2x2x1x64xbf16>,
    %v: tensor<2x2x1x64xbf16>, %table: tensor<2x4xi32>, %pos: tensor<2xi32>)
    -> (tensor<8x16x2x64xbf16>, tensor<8x16x128xbf16>) {
  %kc = kiln.reshape %kflat : tensor<8x16x128xbf16> -> tensor<8x16x2x64xbf16>
  %e0 = tensor.empty() : tensor<8x16x2x64xbf16>
  %e1 = tensor.empty() : tensor<8x16x2x64xbf16>
  // expected-error @below {{kiln.append_kv on the GPU writes its caches in place, but the old 'k_cache' is used after the append; use the appended cache (its result) instead}}
  %0:2 = call @views_k0_append_kv(%kc, %vc, %k, %v, %table, %pos, %e0, %e1) : (tensor<8x16x2x64xbf16>,
      tensor<8x16x2x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x4xi32>, tensor<2xi32>,
      tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>)
  // expected-note @below {{the later use}}
  return %0#1, %kflat : tensor<8x16x2x64xbf16>, tensor<8x16x128xbf16>
}

// -----

func.func private @same_k0_append_kv(%c: tensor<8x16x2x64xbf16>, %k: tensor<2x2x1x64xbf16>,
    %v: tensor<2x2x1x64xbf16>, %table: tensor<2x4xi32>, %pos: tensor<2xi32>,
    %kd: tensor<8x16x2x64xbf16>, %vd: tensor<8x16x2x64xbf16>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>)
    attributes {kiln.kernel} {
  %0:2 = kiln.append_kv %c, %c, %k, %v, %table, %pos : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>,
      tensor<2x2x1x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x4xi32>, tensor<2xi32>
      -> tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
  %1 = bufferization.materialize_in_destination %0#0 in %kd : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  %2 = bufferization.materialize_in_destination %0#1 in %vd : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  return %1, %2 : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
}
func.func @same(%c: tensor<8x16x2x64xbf16>, %k: tensor<2x2x1x64xbf16>, %v: tensor<2x2x1x64xbf16>,
    %table: tensor<2x4xi32>, %pos: tensor<2xi32>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) {
  %e0 = tensor.empty() : tensor<8x16x2x64xbf16>
  %e1 = tensor.empty() : tensor<8x16x2x64xbf16>
  // expected-error @below {{kiln.append_kv on the GPU writes its caches in place, so 'k_cache' and 'v_cache' must not share bytes}}
  %0:2 = call @same_k0_append_kv(%c, %k, %v, %table, %pos, %e0, %e1) : (tensor<8x16x2x64xbf16>,
      tensor<2x2x1x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x4xi32>, tensor<2xi32>,
      tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>)
  return %0#0, %0#1 : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
}

// -----

func.func private @constant_k0_append_kv(%kc: tensor<8x16x2x64xbf16>, %vc: tensor<8x16x2x64xbf16>,
    %k: tensor<2x2x1x64xbf16>, %v: tensor<2x2x1x64xbf16>, %table: tensor<2x4xi32>, %pos: tensor<2xi32>,
    %kd: tensor<8x16x2x64xbf16>, %vd: tensor<8x16x2x64xbf16>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>)
    attributes {kiln.kernel} {
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %table, %pos : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>,
      tensor<2x2x1x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x4xi32>, tensor<2xi32>
      -> tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
  %1 = bufferization.materialize_in_destination %0#0 in %kd : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  %2 = bufferization.materialize_in_destination %0#1 in %vd : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  return %1, %2 : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
}
func.func @constant(%kc: tensor<8x16x2x64xbf16>, %k: tensor<2x2x1x64xbf16>, %v: tensor<2x2x1x64xbf16>,
    %table: tensor<2x4xi32>, %pos: tensor<2xi32>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) {
  %vc = kiln.constant dense<0.0> : tensor<8x16x2x64xbf16>
  %e0 = tensor.empty() : tensor<8x16x2x64xbf16>
  %e1 = tensor.empty() : tensor<8x16x2x64xbf16>
  // expected-error @below {{kiln.append_kv on the GPU writes its caches in place, so 'v_cache' cannot be a constant of the program}}
  %0:2 = call @constant_k0_append_kv(%kc, %vc, %k, %v, %table, %pos, %e0, %e1) : (tensor<8x16x2x64xbf16>,
      tensor<8x16x2x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x4xi32>, tensor<2xi32>,
      tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>)
  return %0#0, %0#1 : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
}

// -----

// K and V as the two halves of one stacked cache [2, pages, ...] (contiguous slices: views of its bytes) do not
// share bytes: each half is written in place. A read of the K half after the append is a read of the old cache;
// a read of the V half before it and of the other half's bytes are not.
func.func private @stacked_k0_append_kv(%kc: tensor<8x16x2x64xbf16>, %vc: tensor<8x16x2x64xbf16>,
    %k: tensor<2x2x1x64xbf16>, %v: tensor<2x2x1x64xbf16>, %table: tensor<2x4xi32>, %pos: tensor<2xi32>,
    %kd: tensor<8x16x2x64xbf16>, %vd: tensor<8x16x2x64xbf16>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>)
    attributes {kiln.kernel} {
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %table, %pos : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>,
      tensor<2x2x1x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x4xi32>, tensor<2xi32>
      -> tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
  %1 = bufferization.materialize_in_destination %0#0 in %kd : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  %2 = bufferization.materialize_in_destination %0#1 in %vd : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  return %1, %2 : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
}
// CHECK-LABEL: func.func @stacked
// CHECK: %[[K:.+]] = kiln.reshape %{{.+}} : tensor<1x8x16x2x64xbf16> -> tensor<8x16x2x64xbf16>
// CHECK: %[[V:.+]] = kiln.reshape %{{.+}} : tensor<1x8x16x2x64xbf16> -> tensor<8x16x2x64xbf16>
// CHECK: call @stacked_k0_append_kv(%[[K]], %[[V]], %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[K]], %[[V]])
func.func @stacked(%kv: tensor<2x8x16x2x64xbf16>, %k: tensor<2x2x1x64xbf16>, %v: tensor<2x2x1x64xbf16>,
    %table: tensor<2x4xi32>, %pos: tensor<2xi32>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) {
  %k5 = kiln.slice %kv offsets [0, 0, 0, 0, 0] strides [1, 1, 1, 1, 1] : tensor<2x8x16x2x64xbf16> -> tensor<1x8x16x2x64xbf16>
  %kc = kiln.reshape %k5 : tensor<1x8x16x2x64xbf16> -> tensor<8x16x2x64xbf16>
  %v5 = kiln.slice %kv offsets [1, 0, 0, 0, 0] strides [1, 1, 1, 1, 1] : tensor<2x8x16x2x64xbf16> -> tensor<1x8x16x2x64xbf16>
  %vc = kiln.reshape %v5 : tensor<1x8x16x2x64xbf16> -> tensor<8x16x2x64xbf16>
  %e0 = tensor.empty() : tensor<8x16x2x64xbf16>
  %e1 = tensor.empty() : tensor<8x16x2x64xbf16>
  %0:2 = call @stacked_k0_append_kv(%kc, %vc, %k, %v, %table, %pos, %e0, %e1) : (tensor<8x16x2x64xbf16>,
      tensor<8x16x2x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x4xi32>, tensor<2xi32>,
      tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>)
  return %0#0, %0#1 : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
}

// -----

func.func private @stacked_old_k0_append_kv(%kc: tensor<8x16x2x64xbf16>, %vc: tensor<8x16x2x64xbf16>,
    %k: tensor<2x2x1x64xbf16>, %v: tensor<2x2x1x64xbf16>, %table: tensor<2x4xi32>, %pos: tensor<2xi32>,
    %kd: tensor<8x16x2x64xbf16>, %vd: tensor<8x16x2x64xbf16>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>)
    attributes {kiln.kernel} {
  %0:2 = kiln.append_kv %kc, %vc, %k, %v, %table, %pos : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>,
      tensor<2x2x1x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x4xi32>, tensor<2xi32>
      -> tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
  %1 = bufferization.materialize_in_destination %0#0 in %kd : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  %2 = bufferization.materialize_in_destination %0#1 in %vd : (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> tensor<8x16x2x64xbf16>
  return %1, %2 : tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>
}
func.func @stacked_old(%kv: tensor<2x8x16x2x64xbf16>, %k: tensor<2x2x1x64xbf16>, %v: tensor<2x2x1x64xbf16>,
    %table: tensor<2x4xi32>, %pos: tensor<2xi32>) -> (tensor<8x16x2x64xbf16>, tensor<1x8x16x2x64xbf16>) {
  %k5 = kiln.slice %kv offsets [0, 0, 0, 0, 0] strides [1, 1, 1, 1, 1] : tensor<2x8x16x2x64xbf16> -> tensor<1x8x16x2x64xbf16>
  %kc = kiln.reshape %k5 : tensor<1x8x16x2x64xbf16> -> tensor<8x16x2x64xbf16>
  %v5 = kiln.slice %kv offsets [1, 0, 0, 0, 0] strides [1, 1, 1, 1, 1] : tensor<2x8x16x2x64xbf16> -> tensor<1x8x16x2x64xbf16>
  %vc = kiln.reshape %v5 : tensor<1x8x16x2x64xbf16> -> tensor<8x16x2x64xbf16>
  %e0 = tensor.empty() : tensor<8x16x2x64xbf16>
  %e1 = tensor.empty() : tensor<8x16x2x64xbf16>
  // expected-error @below {{kiln.append_kv on the GPU writes its caches in place, but the old 'k_cache' is used after the append; use the appended cache (its result) instead}}
  %0:2 = call @stacked_old_k0_append_kv(%kc, %vc, %k, %v, %table, %pos, %e0, %e1) : (tensor<8x16x2x64xbf16>,
      tensor<8x16x2x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x2x1x64xbf16>, tensor<2x4xi32>, tensor<2xi32>,
      tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>) -> (tensor<8x16x2x64xbf16>, tensor<8x16x2x64xbf16>)
  // expected-note @below {{the later use}}
  return %0#1, %k5 : tensor<8x16x2x64xbf16>, tensor<1x8x16x2x64xbf16>
}
