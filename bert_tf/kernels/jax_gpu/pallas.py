"""Calling the JAX speed path's Pallas kernels: through Pallas's Triton backend on GPUs,
or in Pallas's interpreter (any device, for the CPU tests)."""

from jax.experimental import pallas as pl


def call(kernel, grid, in_specs, out_specs, out_shape, args, interpret: bool,
         num_warps: int = 4, num_stages: int = 2):
  """pl.pallas_call(kernel, ...)(*args), with Triton's launch settings unless
  `interpret`."""
  params = {}
  if not interpret:
    from jax.experimental.pallas import triton as plgpu  # pylint: disable=g-import-not-at-top
    params["compiler_params"] = plgpu.CompilerParams(num_warps=num_warps,
                                                     num_stages=num_stages)
  return pl.pallas_call(kernel, grid=grid, in_specs=in_specs, out_specs=out_specs,
                        out_shape=out_shape, interpret=interpret, **params)(*args)
