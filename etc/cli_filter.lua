--[[
greenup's cli_filter for Slurm (cli_filter/lua): picks a job's node count before
allocation. For a job that names an energy policy and a profile and asks for a
node range (sbatch -N 2-16), it runs `greenup plan --json` over that range and
rewrites --nodes to the planned count. Anything unexpected leaves the job as the
user wrote it: this filter never blocks a submission.

Install: copy to /etc/slurm/cli_filter.lua and set CliFilterPlugins=cli_filter/lua
in slurm.conf. Edit the two paths below if greenup lives elsewhere.
]]

local GREENUP = "/usr/bin/greenup"
local SITE = "/etc/slurm/greenup.yaml"

-- Values go onto a command line: accept only plain words (no shell syntax).
local function plain(v)
  return v ~= nil and string.match(v, "^[%w%._:%-]+$") ~= nil
end

-- A reader of the job's SPANK options. Slurm 22.05 does not index SPANK options in the
-- options table, but lists them as "spank:NAME" in its JSON rendering of the options,
-- which is rendered once per job and only if a value is asked for.
local function spank_options(options)
  local json
  return function(name)
    local v = options["spank:" .. name]
    if v == nil and slurm.json_cli_options then
      json = json or slurm.json_cli_options(options) or ""
      v = string.match(json, '"spank:' .. string.gsub(name, "%-", "%%-") .. '"%s*:%s*"([^"]*)"')
    end
    if v == nil or v == "" then return nil end
    return v
  end
end

function slurm_cli_setup_defaults(options, early_pass)
  return slurm.SUCCESS
end

function slurm_cli_pre_submit(options, pack_offset)
  -- Most jobs ask for no node range: they leave before any option is looked up.
  local nodes = options["nodes"]
  if not nodes then return slurm.SUCCESS end
  local lo, hi = string.match(nodes, "^(%d+)%-(%d+)$")
  if not lo or tonumber(lo) >= tonumber(hi) then return slurm.SUCCESS end
  local spank_opt = spank_options(options)
  local policy = spank_opt("energy-policy")
  local profile = spank_opt("energy-profile")
  if not (policy and profile) then return slurm.SUCCESS end
  if not (plain(policy) and plain(profile)) then return slurm.SUCCESS end

  local cmd = GREENUP .. " plan --json --site " .. SITE .. " --policy " .. policy ..
    " --profile " .. profile .. " --node-count " .. lo .. "-" .. hi
  for _, o in ipairs({ {"energy-cap", "--energy-cap"}, {"power-cap", "--power-cap"} }) do
    local v = spank_opt(o[1])
    if v then
      if not plain(v) then return slurm.SUCCESS end
      cmd = cmd .. " " .. o[2] .. " " .. v
    end
  end
  local t = options["time"]
  if plain(t) then cmd = cmd .. " --time-limit " .. t end

  local p = io.popen(cmd .. " 2>/dev/null")
  if not p then return slurm.SUCCESS end
  local out = p:read("*a")
  p:close()
  local count = tonumber(string.match(out or "", '"node_count"%s*:%s*(%d+)'))
  local feasible = string.match(out or "", '"feasible"%s*:%s*true') ~= nil
  if count and count >= tonumber(lo) and count <= tonumber(hi) then
    options["nodes"] = tostring(count)
    slurm.log_verbose("greenup: %s plans %d node(s) in %s (%s)", policy, count, nodes,
      feasible and "feasible" or "best effort")
  end
  return slurm.SUCCESS
end

function slurm_cli_post_submit(offset, job_id, step_id)
  return slurm.SUCCESS
end
