import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState } from "react";
import { ApiError, api, call } from "../api/client";
import type { AdminUser } from "../api/types";
import { Button, ErrorText, Field, inputClass, Loading, ShownOnce, Time } from "../components/ui";
import { announce } from "../lib/announce";
import { Forbidden } from "./Errors";

const PLANS = ["free", "starter", "pro"];

function UserRow({ user }: { user: AdminUser }) {
  const client = useQueryClient();
  const [plan, setPlan] = useState(user.plan);
  const [role, setRole] = useState<AdminUser["role"]>(user.role);
  const save = useMutation({
    mutationFn: () =>
      call(() =>
        api.PATCH("/api/v1/admin/users/{username}", {
          params: { path: { username: user.username } },
          body: { plan, role },
        }),
      ),
    onSuccess: () => {
      announce(`${user.username} saved`);
      client.invalidateQueries({ queryKey: ["admin-users"] });
    },
  });
  return (
    <tr className="border-t border-line">
      <td className="p-2 font-mono">{user.username}</td>
      <td className="p-2">
        <select
          aria-label={`Plan of ${user.username}`}
          className={inputClass}
          value={plan}
          onChange={(e) => setPlan(e.target.value)}
        >
          {[...new Set([...PLANS, user.plan])].map((p) => (
            <option key={p}>{p}</option>
          ))}
        </select>
      </td>
      <td className="p-2">
        <select
          aria-label={`Role of ${user.username}`}
          className={inputClass}
          value={role}
          onChange={(e) => setRole(e.target.value as AdminUser["role"])}
        >
          <option value="user">user</option>
          <option value="admin">admin</option>
        </select>
      </td>
      <td className="p-2">{user.has_password ? "set" : "none (API tokens only)"}</td>
      <td className="p-2">
        <Time iso={user.created_at} />
      </td>
      <td className="p-2">
        <Button
          onClick={() => save.mutate()}
          disabled={save.isPending || (plan === user.plan && role === user.role)}
          aria-label={`Save ${user.username}`}
        >
          Save
        </Button>
        <ErrorText error={save.error} />
      </td>
    </tr>
  );
}

export function Admin() {
  const client = useQueryClient();
  const users = useQuery({
    queryKey: ["admin-users"],
    queryFn: () => call(() => api.GET("/api/v1/admin/users")),
    retry: false,
  });
  const [form, setForm] = useState({
    username: "",
    plan: "free",
    role: "user" as AdminUser["role"],
    password: "",
  });
  const [token, setToken] = useState<string | null>(null);
  const create = useMutation({
    mutationFn: () =>
      call(() =>
        api.POST("/api/v1/admin/users", {
          body: {
            username: form.username,
            plan: form.plan,
            role: form.role,
            password: form.password || null,
          },
        }),
      ),
    onSuccess: (made) => {
      setToken(made.token);
      setForm({ username: "", plan: "free", role: "user", password: "" });
      client.invalidateQueries({ queryKey: ["admin-users"] });
    },
  });
  if (users.error instanceof ApiError && users.error.status === 403) return <Forbidden />;
  return (
    <div className="space-y-4">
      <h1 className="text-2xl font-semibold">Admin: users, plans and roles</h1>
      <form
        className="flex flex-wrap items-end gap-3 rounded-lg border border-line bg-panel p-4"
        onSubmit={(e) => {
          e.preventDefault();
          create.mutate();
        }}
      >
        <h2 className="w-full font-semibold">New user</h2>
        <Field label="Username">
          <input
            className={inputClass}
            value={form.username}
            onChange={(e) => setForm({ ...form, username: e.target.value })}
          />
        </Field>
        <Field label="Plan">
          <select
            className={inputClass}
            value={form.plan}
            onChange={(e) => setForm({ ...form, plan: e.target.value })}
          >
            {PLANS.map((p) => (
              <option key={p}>{p}</option>
            ))}
          </select>
        </Field>
        <Field label="Role">
          <select
            className={inputClass}
            value={form.role}
            onChange={(e) => setForm({ ...form, role: e.target.value as AdminUser["role"] })}
          >
            <option value="user">user</option>
            <option value="admin">admin</option>
          </select>
        </Field>
        <Field label="Password (optional)">
          <input
            className={inputClass}
            type="password"
            autoComplete="new-password"
            value={form.password}
            onChange={(e) => setForm({ ...form, password: e.target.value })}
          />
        </Field>
        <Button type="submit" variant="primary" disabled={create.isPending || !form.username}>
          Create user
        </Button>
        <div className="w-full">
          <ErrorText error={create.error} />
        </div>
      </form>
      {users.isPending ? (
        <Loading what="users" />
      ) : users.error ? (
        <ErrorText error={users.error} />
      ) : (
        <table className="w-full rounded-lg border border-line bg-panel text-sm">
          <thead>
            <tr className="text-left">
              <th className="p-2">User</th>
              <th className="p-2">Plan</th>
              <th className="p-2">Role</th>
              <th className="p-2">Password</th>
              <th className="p-2">Created</th>
              <th className="p-2">
                <span className="sr-only">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {users.data.map((u) => (
              <UserRow key={u.username} user={u} />
            ))}
          </tbody>
        </table>
      )}
      <ShownOnce
        value={token}
        title="The new user's API token"
        what="token"
        note="Hand it to the user."
        onClose={() => setToken(null)}
      />
    </div>
  );
}
