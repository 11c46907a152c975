--[[
cli_filter.lua: what --cicada asks of the scheduler, added at submission
by srun, sbatch and salloc (slurm.conf: CliFilterPlugins=cli_filter/lua,
this file beside slurm.conf). Cicada's SPANK plugin refuses a step whose
job does not hold them; this only saves users from writing them.

  --cicada=local[:N]    adds --gres=cicada:N (the node's own server)
  --cicada=remote[:N]   adds --licenses=cicada@NODE:N, NODE the pool's GPU
                        node with the most free (else the largest), from
                        `scontrol show licenses`

A job that names a cicada GRES or licence itself keeps it. Steps inside
an allocation are left alone (the job holds what they use).
--]]

local function request(options)
	local spank = options.spank
	local v = spank and spank.cicada and spank.cicada.cicada
	if v == nil then return nil end
	if v == "set" or v == "" then v = "local" end
	local mode, n = string.match(v, "^(%a+):?(%d*)$")
	if mode ~= "local" and mode ~= "remote" then return nil end
	return mode, tonumber(n) or 1
end

-- The cicada@NODE licence to ask for n of: the most free, else the largest.
local function pick_licence(n)
	local best, best_free, best_total = nil, -1, -1
	local p = io.popen("scontrol show licenses -o 2>/dev/null")
	if not p then return nil end
	for line in p:lines() do
		local name = string.match(line, "LicenseName=(cicada@%S+)")
		local total = tonumber(string.match(line, "Total=(%d+)")) or 0
		local free = tonumber(string.match(line, "Free=(%d+)")) or 0
		if name and total >= n then
			if (free >= n and free > best_free) or (best_free < n and free < n and total > best_total) then
				best, best_free, best_total = name, free, total
			end
		end
	end
	p:close()
	return best
end

function slurm_cli_setup_defaults(options, early)
	return slurm.SUCCESS
end

function slurm_cli_pre_submit(options, offset)
	local mode, n = request(options)
	if mode == nil then return slurm.SUCCESS end
	if options.type == "srun" and os.getenv("SLURM_JOB_ID") then return slurm.SUCCESS end
	if mode == "local" then
		local gres = options["gres"]
		if gres == nil or not string.find(gres, "cicada", 1, true) then
			gres = (gres and gres ~= "" and (string.gsub(gres, "gres:", "") .. ",") or "") .. "cicada:" .. n
			options["gres"] = gres
		end
	else
		local lic = options["licenses"]
		if lic == nil or not string.find(lic, "cicada@", 1, true) then
			local name = pick_licence(n)
			if name == nil then
				slurm.log_error("--cicada=remote:%d: no licence cicada@NODE of %d or more (scontrol show licenses)", n, n)
				return slurm.ERROR
			end
			options["licenses"] = (lic and lic ~= "" and (lic .. ",") or "") .. name .. ":" .. n
		end
	end
	return slurm.SUCCESS
end

function slurm_cli_post_submit(offset, jobid, stepid)
	return slurm.SUCCESS
end
