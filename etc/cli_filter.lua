--[[
greenup's cli_filter for Slurm (cli_filter/lua). For a job that asks for greenup
(--energy-policy, --energy-profile, --energy-quote):
- it picks the node count before allocation: for a job that names a policy and a
  profile and asks for a node range (sbatch -N 2-16), it runs `greenup plan --json`
  over that range and rewrites --nodes to the planned count;
- it shows the job's energy quote, one line from `greenup quote`: the predicted
  energy, time and nodes, and what each energy budget the job falls under has left;
- with --energy-quote it prints that line and submits nothing, like --test-only;
- when a budget would refuse the job and the site fails refused jobs
  (enforce: strict), it stops the submission with the quote in the message;
- under power.enforce: queue, it asks for the plan's watts as the job's power license
  (--licenses=greenup_w:W), which greenup's job_submit script then bounds.
Anything unexpected (greenup missing, greenupd unreachable) leaves the job as the
user wrote it: only the two cases above stop a submission.

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

-- Plan the node count of a job that asks for a range (sbatch -N 2-16).
local function plan_nodes(options, spank_opt, policy, profile)
  local nodes = options["nodes"]
  if not nodes then return end
  local lo, hi = string.match(nodes, "^(%d+)%-(%d+)$")
  if not lo or tonumber(lo) >= tonumber(hi) then return end
  if not (policy and profile) then return end

  local cmd = GREENUP .. " plan --json --site " .. SITE .. " --policy " .. policy ..
    " --profile " .. profile .. " --node-count " .. lo .. "-" .. hi
  for _, o in ipairs({ {"energy-cap", "--energy-cap"}, {"power-cap", "--power-cap"} }) do
    local v = spank_opt(o[1])
    if v then
      if not plain(v) then return end
      cmd = cmd .. " " .. o[2] .. " " .. v
    end
  end
  local t = options["time"]
  if plain(t) then cmd = cmd .. " --time-limit " .. t end

  local p = io.popen(cmd .. " 2>/dev/null")
  if not p then return end
  local out = p:read("*a")
  p:close()
  local count = tonumber(string.match(out or "", '"node_count"%s*:%s*(%d+)'))
  local feasible = string.match(out or "", '"feasible"%s*:%s*true') ~= nil
  if count and count >= tonumber(lo) and count <= tonumber(hi) then
    options["nodes"] = tostring(count)
    slurm.log_verbose("greenup: %s plans %d node(s) in %s (%s)", policy, count, nodes,
      feasible and "feasible" or "best effort")
  end
end

-- The job's quote from greenupd: its line, whether a budget would refuse it, and
-- whether that refusal would fail the job (enforce: strict). nil when greenup cannot
-- say (a missing binary, an unreachable greenupd, an option it cannot pass on).
local function quote(options, spank_opt, policy, profile)
  local cmd = GREENUP .. " quote --json --config " .. SITE
  local nodelist = options["nodelist"]
  if plain(nodelist) then
    cmd = cmd .. " --nodes " .. nodelist
  else
    local count = string.match(options["nodes"] or "1", "^(%d+)")
    if not count then return nil end
    cmd = cmd .. " --node-count " .. count
  end
  local args = {
    {"time", options["time"]}, {"partition", options["partition"]},
    {"account", options["account"]}, {"policy", policy}, {"profile", profile},
    {"energy-cap", spank_opt("energy-cap")}, {"power-cap", spank_opt("power-cap")},
  }
  for _, a in ipairs(args) do
    local v = a[2]
    if v ~= nil and v ~= "" then
      if not plain(v) then return nil end
      cmd = cmd .. " --" .. a[1] .. " " .. v
    end
  end
  local p = io.popen(cmd .. " 2>/dev/null")
  if not p then return nil end
  local out = p:read("*a") or ""
  p:close()
  local line = string.match(out, '"line"%s*:%s*"([^"]*)"')
  if not line then return nil end
  return {
    line = line,
    refused = string.match(out, '"refused"%s*:%s*true') ~= nil,
    fails = string.match(out, '"fails"%s*:%s*true') ~= nil,
    hold_license = string.match(out, '"hold"%s*:%s*{%s*"license"%s*:%s*"([%w_]+)"'),
    hold_w = tonumber(string.match(out, '"hold"%s*:%s*{[^}]*"watts"%s*:%s*(%d+)')),
  }
end

function slurm_cli_pre_submit(options, pack_offset)
  -- Most jobs name no greenup option: they leave after three lookups.
  local spank_opt = spank_options(options)
  local policy = spank_opt("energy-policy")
  local profile = spank_opt("energy-profile")
  local asked = spank_opt("energy-quote")
  if not (policy or profile or asked) then return slurm.SUCCESS end
  if (policy and not plain(policy)) or (profile and not plain(profile)) then
    return slurm.SUCCESS
  end

  plan_nodes(options, spank_opt, policy, profile)
  -- A step's srun inside a job inherits the job's options: the job had its quote.
  if os.getenv("SLURM_JOB_ID") and not asked then return slurm.SUCCESS end
  local q = quote(options, spank_opt, policy, profile)
  if asked then
    if q then
      slurm.log_info("greenup: %s", q.line)
      if q.refused then
        slurm.log_info("greenup: a budget's warning level would refuse this job now%s",
          q.fails and "" or "; it would run unchanged (enforce: open)")
      end
    else
      slurm.log_info("greenup: no quote: greenup or greenupd did not answer")
    end
    slurm.log_info("greenup: --energy-quote: nothing submitted")
    return slurm.ERROR
  end
  if q then
    if q.fails then
      slurm.log_error("greenup: refused by an energy budget: %s", q.line)
      return slurm.ERROR
    end
    slurm.log_info("greenup: %s", q.line)
    -- Under power.enforce: queue the job holds its plan's watts as a license rather
    -- than its nodes' full power (greenup's job_submit script keeps it within bounds).
    -- A license the user named is left as it is.
    local licenses = options["licenses"]
    if q.hold_license and q.hold_w and not string.find(licenses or "", q.hold_license, 1, true) then
      local hold = q.hold_license .. ":" .. q.hold_w
      if licenses and licenses ~= "" then hold = licenses .. "," .. hold end
      options["licenses"] = hold
      slurm.log_info("greenup: the job holds %d W of the power cap while it runs", q.hold_w)
    end
  end
  return slurm.SUCCESS
end

function slurm_cli_post_submit(offset, job_id, step_id)
  return slurm.SUCCESS
end
