--[[ The overhead benchmark's baseline cli_filter: the three functions Slurm's
cli_filter/lua calls, doing nothing. What Slurm pays for running any cli_filter script
(loading Lua and the script in every sbatch, salloc and srun) is the difference between
no cli_filter and this one; greenup's own filter (etc/cli_filter.lua) adds the rest.
Used by tests/cluster/bench.sh, never installed. ]]

function slurm_cli_setup_defaults(options, early_pass)
  return slurm.SUCCESS
end

function slurm_cli_pre_submit(options, pack_offset)
  return slurm.SUCCESS
end

function slurm_cli_post_submit(offset, job_id, step_id)
  return slurm.SUCCESS
end
